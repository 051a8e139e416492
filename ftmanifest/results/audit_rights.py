"""Rights before handoff: licences, accepted terms, retention and backup recipients.

Layer: judging rooms - pure core (reads the manifest model only).  Rules:

  audit.model-license         ``model.license`` is missing
  audit.terms-not-accepted    ``model.terms_accepted`` is false
  audit.data-license          a data entry without a ``license``
  audit.retention-missing     a data entry declares personal data, yet
                              ``security.retention.raw_data`` is not set
  audit.backup-recipients-missing  ``security.retention.backups`` keeps backups,
                              yet ``security.backup_recipients`` is empty
  audit.backup-retention-missing   recipients are named, yet no
                              ``security.retention.backups`` (kept forever; warning);
                              keep rules with no rule at all count as none

The manifest has no field that says "this policy requires retention"; the
policy asks for it through what it declares: personal data needs a raw-data
retention, kept backups need recipients to encrypt to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ftmanifest.findings import Finding

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest


def _row(loc: tuple[str | int, ...], rule: str, message: str, hint: str, **kw: Any) -> Finding:
    return Finding.at(loc, kind="audit", rule=rule, message=message, hint=hint, **kw)


def rights_findings(manifest: Manifest) -> list[Finding]:
    """Every rights problem of ``manifest`` (a ``manifest.model.Manifest``)."""
    out: list[Finding] = []
    model = manifest.model
    if not (model.license or "").strip():
        out.append(
            _row(
                ("model", "license"),
                "audit.model-license",
                "the base model's licence is not recorded",
                "set model.license to the weights' licence identifier",
                expected="a licence identifier",
                observed="missing",
            )
        )
    if not model.terms_accepted:
        out.append(
            _row(
                ("model", "terms_accepted"),
                "audit.terms-not-accepted",
                "the base model's terms are not recorded as accepted",
                "read the terms (model.terms_url), then set model.terms_accepted: true",
                expected="true",
                observed="false",
            )
        )
    for i, entry in enumerate(manifest.data):
        if not (entry.license or "").strip():
            out.append(
                _row(
                    ("data", i, "license"),
                    "audit.data-license",
                    f"data set {entry.name!r} has no licence or rights recorded",
                    f"set data[{i}].license to the licence or approval it is used under",
                    path=entry.path,
                    expected="a licence",
                    observed="missing",
                )
            )
    out += _retention_findings(manifest)
    return out


def _retention_findings(manifest: Manifest) -> list[Finding]:
    security = manifest.security
    out: list[Finding] = []
    personal = [e.name for e in manifest.data if e.contains_personal_data]
    backups = security.retention.backup_policy()
    has_backup_rules = backups is not None and not backups.is_unset()
    if personal and not security.retention.raw_data:
        out.append(
            _row(
                ("security", "retention", "raw_data"),
                "audit.retention-missing",
                f"personal data ({', '.join(personal)}) without a retention period",
                "set security.retention.raw_data (e.g. 180d)",
                expected="a retention period",
                observed="kept forever",
            )
        )
    if has_backup_rules and not security.backup_recipients:
        out.append(
            _row(
                ("security", "backup_recipients"),
                "audit.backup-recipients-missing",
                "backups are kept, but no recipient is named to encrypt them to",
                "add age recipients (age1...) to security.backup_recipients",
                expected="one or more age recipients",
                observed="none",
            )
        )
    if security.backup_recipients and not has_backup_rules:
        out.append(
            _row(
                ("security", "retention", "backups"),
                "audit.backup-retention-missing",
                "backups are encrypted to recipients but kept forever",
                "set security.retention.backups (e.g. 365d)",
                expected="a retention period",
                observed="kept forever",
                severity="warning",
            )
        )
    return out
