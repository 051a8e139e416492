"""``verify``: the manifest against this machine, its model, data and signature.

Layer: judging rooms - drift/verify (orchestration).  Loads the manifest, observes,
compares (pure ``drift.compare``), checks the signature, applies deliberate acceptances,
and returns a ``VerifyReport``; the CLI prints it and chooses the exit code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest import held
from ftmanifest.errors import FtManifestError, RefusedError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import PathOutsideError, locate, resolve_inside
from ftmanifest.hfcache import COMMIT_RE, branch_commit, hub_snapshot
from ftmanifest.ledger.parents import judge_variant
from ftmanifest.ledger.summary import for_manifest, preflight_warning, warnings_of
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.pinned import pinned_files
from ftmanifest.manifest.renamed import renamed_keywords
from ftmanifest.probe.git import one_observation
from ftmanifest.safe_text import escape
from ftmanifest.signing import verify_manifest_signature
from ftmanifest.signing.errors import ManifestChangedError, SignatureRefusedError
from ftmanifest.signing.verify import UNVOUCHED, changes_text
from ftmanifest.verify.acceptances import Acceptance, apply_acceptances
from ftmanifest.verify.drift import compare
from ftmanifest.verify.environment import observed_environment
from ftmanifest.verify.observe import observe
from ftmanifest.verify.publisher import publisher_rows

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest
    from ftmanifest.manifest.environment import Environment
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.signing.errors import SignatureRefusedError
    from ftmanifest.signing.verify import SignatureReport
    from ftmanifest.snapshot import Hasher
    from ftmanifest.verify.observe import Observed


@dataclass
class VerifyReport:
    """What ``verify_manifest`` found: every drift row (``ok`` when none is an error),
    the acceptances applied, and what was observed."""

    manifest_path: Path
    manifest_digest: str  # sha256 of the manifest's canonical form
    findings: list[Finding]  # drift rows: field, expected, observed, hint
    accepted: list[Acceptance] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    environment: Environment | None = None  # observed here; None when nothing was probed
    signature: SignatureReport | None = None  # when the signature was checked
    signature_checked: bool = True
    loaded: LoadedManifest | None = None  # the LoadedManifest judged (ids and body for the ledger)
    ledger: dict[str, Any] | None = None  # ledger.summary of the experiment, if a ledger exists
    observed: Observed | None = None  # file digests (for comparing torchrun ranks)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest": str(self.manifest_path),
            "digest": self.manifest_digest,
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
            "accepted": [{**a.finding.to_dict(), "reason": a.reason} for a in self.accepted],
            "warnings": self.warnings,
            "signature": self.signature.to_dict() if self.signature is not None else None,
            "ledger": self.ledger,
        }


class DriftError(RefusedError):
    """Raised by callers that must stop on drift (the Trainer guard).

    Carries the rows as ``findings`` (and the whole ``report``); the edge renders
    them (``output.error_text``).  ``str()`` adds one line per row, so a
    traceback alone still names every field, expected and observed value.
    """

    reason = "drift"

    def __init__(self, report: VerifyReport) -> None:
        fields = ", ".join(dict.fromkeys(f.field or f.rule for f in report.findings))
        super().__init__(
            f"{len(report.findings)} difference(s) between the manifest and this machine: "
            + fields,
            path=str(report.manifest_path),
            hint=f"fix them, or accept one on purpose: ftmanifest verify {report.manifest_path} "
            "--accept FIELD --reason TEXT",
            findings=report.findings,
        )
        self.report = report

    def __str__(self) -> str:
        rows = (
            f"\n  {escape(f.field or f.rule)}: expected {escape(str(f.expected))}, "
            f"observed {escape(str(f.observed))}"
            for f in self.findings
        )
        return escape(self.message) + "".join(rows)


@renamed_keywords(path="manifest")
@one_observation()  # git is asked for a folder's work tree root once per verify
def verify_manifest(
    manifest: str | Path,
    *,
    signature: bool = True,
    trust_path: Path | None = None,
    threshold: int = 1,
    accept: Mapping[str, str] | None = None,
    use_cache: bool = True,
    code_dir: Path | None = None,
    allow_outside: bool = False,
    scan: bool = True,
    ledger: Path | str | None = None,
    hasher: Hasher | None = None,
) -> VerifyReport:
    """Compare the manifest at ``manifest`` (its path) with everything here; never
    raises on drift.

    ``hasher``: hashes the model, data and pinned files (``observe``'s keyword).
    Each file hashed here is opened once: the scan and the header checks read
    the descriptor hashing kept (``ftmanifest.held``), and a file that changed
    under its path before the verdict is a ``drift.moved`` row.
    """
    with held.holding() as kept:
        report = _verify(
            manifest,
            signature=signature,
            trust_path=trust_path,
            threshold=threshold,
            accept=accept,
            use_cache=use_cache,
            code_dir=code_dir,
            allow_outside=allow_outside,
            scan=scan,
            ledger=ledger,
            hasher=hasher,
        )
        moved = moved_rows(kept, report)
    if moved:
        report.findings = moved + report.findings
    return report


def moved_rows(kept: held.Held, report: VerifyReport) -> list[Finding]:
    """One error row for each file kept open that changed or was replaced under its path."""
    changes = kept.moved()
    if not changes:
        return []
    manifest_path = report.manifest_path
    base = manifest_path.parent
    owners = _owners(report.loaded.manifest, base) if report.loaded is not None else []
    rows = []
    for name, how in changes:
        loc = next((loc for top, loc in owners if _under(name, top)), ("files",))
        rel = os.path.relpath(name, base) if _under(name, str(base)) else name
        rows.append(
            Finding.at(
                loc,
                kind="drift",
                rule="drift.moved",
                message=f"{rel} changed while verify read it; the verdict is not about it",
                path=rel,
                expected="the file as it was hashed",
                observed=how,
                hint="wait until whatever writes the folder has finished, then verify again",
            )
        )
    return rows


def _under(name: str, top: str) -> bool:
    return name == top or name.startswith(top.rstrip(os.sep) + os.sep)


def _owners(manifest: Manifest, base: Path) -> list[tuple[str, tuple[str | int, ...]]]:
    """(absolute path, field) of everything verify hashes, most specific first."""
    out: list[tuple[str, tuple[str | int, ...]]] = []
    for loc, rel, _digest in pinned_files(manifest):
        out.append((os.path.abspath(base / rel), loc))
    for i, entry in enumerate(manifest.data):
        out.append((os.path.abspath(base / entry.path), ("data", i, "path")))
    if manifest.model.path is not None:
        out.append((os.path.abspath(base / manifest.model.path), ("model", "path")))
    return sorted(out, key=lambda row: -len(row[0]))


def _verify(
    path: str | Path,
    *,
    signature: bool,
    trust_path: Path | None,
    threshold: int,
    accept: Mapping[str, str] | None,
    use_cache: bool,
    code_dir: Path | None,
    allow_outside: bool,
    scan: bool,
    ledger: Path | str | None,
    hasher: Hasher | None,
) -> VerifyReport:
    manifest_path = Path(path)
    loaded = load_manifest(manifest_path)
    if loaded.manifest.security.rehash == "always":
        use_cache = False  # the team pays the hashing time on purpose (stat-cache blind spot)
    seen = observe(
        loaded.manifest,
        manifest_path,
        use_cache=use_cache,
        code_dir=code_dir,
        allow_outside=allow_outside,
        hasher=hasher,
    )
    findings = compare(loaded.manifest, seen)
    model_drift = any(f.loc and f.loc[0] == "model" for f in findings)
    if not model_drift and getattr(loaded.manifest.method, "kind", None) == "lora":
        # the LoRA method against the pinned base's headers: targets exist,
        # trainable_params is what the shapes imply; judged only on the pinned weights
        from ftmanifest.adapter.base import manifest_method_findings

        findings += [
            f._replace(kind="drift")
            for f in manifest_method_findings(
                loaded.manifest, manifest_path, allow_outside=allow_outside
            )
        ]
    # the publisher lock found in model.sig must still be trusted (its bytes are pinned)
    findings += publisher_rows(loaded.manifest.model.publisher_signature, manifest_path, trust_path)
    if loaded.manifest.experiment.parent:
        findings += variant_check(loaded, manifest_path, ledger=ledger)
    if scan and "verify" in loaded.manifest.security.scan.on:
        findings += scan_for_verify(
            loaded.manifest, manifest_path, use_cache=use_cache, allow_outside=allow_outside
        )
    warnings: list[str] = []

    environment = observed_environment(seen)  # built once: the ledger and the report share it
    history = ledger_summary(loaded, manifest_path, ledger, warnings, environment, trust_path)
    sig_report = None
    if signature:
        sig_report, sig_row = _check_signature(
            manifest_path, loaded.canonical_bytes(), trust_path, threshold
        )
        if sig_row is not None:
            findings.insert(0, sig_row)
    else:
        warnings.append(
            "signature NOT checked (--no-signature): this manifest may have been "
            "altered or signed by no one you trust"
        )
    moved = hub_main_warning(loaded.manifest, seen)
    if moved is not None:
        warnings.append(moved)
    remaining, accepted, unused = apply_acceptances(findings, accept or {})
    return VerifyReport(
        manifest_path,
        loaded.digest(),
        remaining,
        accepted,
        warnings + unused,
        environment,
        sig_report,
        signature_checked=signature,
        loaded=loaded,
        ledger=history,
        observed=seen,
    )


def hub_main_warning(manifest: Manifest, seen: Any) -> str | None:
    """A warning when the hub cache's ``refs/main`` is not the pinned commit: a script
    that loads the model by repo id gets other weights than those verified."""
    model = seen.model
    pinned = manifest.model.revision
    if manifest.model.repo is None or model.source != "hub-cache" or not model.folder:
        return None
    main = branch_commit(Path(model.folder))
    if main is None or pinned is None or not COMMIT_RE.match(pinned) or main == pinned:
        return None
    repo = manifest.model.repo
    return (
        f"model {repo}: the hub cache's refs/main is {main}, not the pinned commit {pinned}: "
        f'a script loading "{repo}" by repo id gets other weights; load the pinned ones '
        f'with from_pretrained("{repo}", revision="{pinned}")'
    )


def ledger_summary(
    loaded: LoadedManifest,
    manifest_path: Path,
    ledger: Path | str | None,
    warnings: list[str],
    environment: Any = None,
    trust_path: Path | None = None,
) -> dict[str, Any] | None:
    """What the ledger says about this experiment (attempts, budget, sealed
    uses, the last preflight), its warnings added to ``warnings``; None when
    there is no ledger (then the preflight is missing too).  In a ledger that
    signs only records signed by a key of the trust file (``trust_path``, else
    the manifest's) count."""
    try:
        history, entries = for_manifest(loaded, manifest_path, ledger, trust_path)
    except OSError as exc:
        warnings.append(f"ledger not read: {exc.strerror or exc}")
        return None
    state, warning = preflight_warning(entries, loaded, environment)
    if history is not None:
        warnings += warnings_of(history)
        history["preflight"] = state
    if warning is not None:
        warnings.append(warning)
    return history


def variant_check(
    loaded: LoadedManifest, manifest_path: Path, *, ledger: Path | str | None = None
) -> list[Finding]:
    """A variant against its parent, found by id beside it or else in the ledger
    (``ftmanifest.ledger.parents``).  A parent found nowhere is an
    error here: what verify passes must be judged."""
    return judge_variant(loaded, manifest_path, ledger=ledger, missing="error")


def scan_for_verify(
    manifest: Manifest, manifest_path: Path, *, use_cache: bool, allow_outside: bool
) -> list[Finding]:
    """The security policy's scan of the data (and the model's pickles), cached by digest:
    the findings that fail it (``scan.judge.failing``, as ``ftmanifest scan`` judges)."""
    from ftmanifest.scan import baseline as scan_baseline
    from ftmanifest.scan.cache import scan_cached
    from ftmanifest.scan.engine import ScanOptions
    from ftmanifest.scan.judge import failing

    policy = manifest.security.scan
    base = manifest_path.parent
    data_paths = []
    for i, entry in enumerate(manifest.data):
        path, _problem = locate(base, entry.path, ("data", i, "path"), allow_outside)
        if path is not None:  # otherwise already a drift row
            data_paths.append(path)
    options = ScanOptions(secrets=policy.secrets, pii=policy.pii, pickles=policy.pickles)
    found = scan_cached(data_paths, options, use_cache=use_cache).findings
    if policy.pickles:
        model_dir, root = _model_folder(manifest, base, allow_outside)
        if model_dir is not None:
            model_options = ScanOptions(secrets=policy.secrets, pii=False, pickles=True)
            found += scan_cached(
                [model_dir], model_options, use_cache=use_cache, symlink_root=root
            ).findings
    if policy.baseline:
        accepted = scan_baseline.load(base / policy.baseline)
        found, _ = scan_baseline.apply(found, accepted, policy.baseline)
    return failing(found)


def _model_folder(
    manifest: Manifest, base: Path, allow_outside: bool
) -> tuple[Path | None, Path | None]:
    """The model folder to scan and its symlink root; (None, None) when it is not here.

    A local ``model.path``, or the cached snapshot of the pinned hub commit
    (its files link into the repository's blobs).  A missing model is already
    a drift row, so it is not scanned here.
    """
    m = manifest.model
    if m.path is not None:
        try:
            folder = resolve_inside(base, m.path, ("model", "path"), allow_outside)
        except PathOutsideError:
            return None, None
        return (folder, None) if folder.is_dir() else (None, None)
    assert m.repo is not None  # ModelSource._one_source: a path or a repo
    try:
        snap = hub_snapshot(m.repo, m.revision)
    except FtManifestError:
        return None, None
    return snap.folder, snap.symlink_root


def _check_signature(
    manifest_path: Path, canonical: bytes, trust_path: Path | None, threshold: int
) -> tuple[Any, Finding | None]:
    try:
        report = verify_manifest_signature(
            manifest_path, canonical, trust_path=trust_path, threshold=threshold
        )
    except SignatureRefusedError as exc:
        return None, _signature_row(exc, manifest_path)
    return report, None


def _signature_row(exc: SignatureRefusedError, manifest_path: Path) -> Finding:
    """The ``signature`` drift row of a refusal: a manifest edited after signing
    names each changed field with its signed and its current value (the
    signatures verified, so the signed values are trusted); a payload no trusted
    signature covers is said to differ, and none of its values is shown."""
    # `observed` alone is often just the reason code again; the message names
    # the signature and its key id ("signature 0 by SHA256:... refused: ...").
    seen = exc.message if exc.observed in (None, "", exc.reason) else exc.observed
    extra: dict[str, Any] = {"reason": exc.reason}
    if isinstance(exc, ManifestChangedError) and exc.changes:
        seen = changes_text(exc.changes)
        extra["changes"] = [c.to_dict() for c in exc.changes]
    if exc.payload_unvouched:
        seen += "" if UNVOUCHED in seen else UNVOUCHED
        extra["payload_unvouched"] = True
    return Finding(
        kind="drift",
        rule="drift.signature",
        message=f"signature refused ({exc.reason})",
        path=exc.path or str(manifest_path),
        field="signature",
        expected=exc.expected or "trusted",
        observed=seen if seen.startswith(exc.reason) else f"{exc.reason}: {seen}",
        hint=exc.hint,
        extra=extra,
    )
