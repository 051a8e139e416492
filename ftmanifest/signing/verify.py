"""Verify a manifest's signature envelope against the trusted signers.

Layer: signing (reads the envelope and trust file; judging is pure).  The
manifest client of ``attest.verify_envelope``; order, strictly: parse the
envelope -> verify every signature over the PAE of the exact payload bytes
with the trusted keys -> count distinct trusted keys against the threshold ->
only then parse the payload -> compare it with the canonical manifest on disk.
Each failure raises its own error class.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ftmanifest.errors import UsageError
from ftmanifest.manifest.diff import Change, diff_values, shown_value
from ftmanifest.signing import errors as E
from ftmanifest.signing._files import ENVELOPE_MAX_BYTES
from ftmanifest.signing.attest import verify_envelope
from ftmanifest.signing.dsse import Envelope, parse_envelope
from ftmanifest.signing.judge import SignatureCheck, Wording, check_signatures, now_or
from ftmanifest.signing.locate import TrustSource, choose_trust_file
from ftmanifest.signing.sign import envelope_path_for
from ftmanifest.signing.statement import (
    EXPECT,
    Statement,
    manifest_digest_hex,
    manifest_statement,
    statement_payload,
)
from ftmanifest.signing.trust import TrustStore, load_trust
from ftmanifest.untrusted import read_untrusted

__all__ = [
    "Inspection",
    "SignatureCheck",
    "SignatureReport",
    "changes_text",
    "inspect_signatures",
    "read_envelope",
    "verify_manifest_signature",
]

WORDING = Wording(
    what="manifest",
    cosign_hint="ask another trusted signer to run `ftmanifest sign M --key THEIR_KEY`",
)


@dataclass(frozen=True)
class SignatureReport:
    manifest_path: Path
    envelope_path: Path
    trust_path: Path
    trust_source: TrustSource
    subject_name: str
    digest: str  # sha256:<hex> of the canonical manifest
    threshold: int
    signatures: tuple[SignatureCheck, ...]
    valid_keyids: tuple[str, ...]  # distinct trusted keys with valid signatures

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("manifest_path", "envelope_path", "trust_path"):
            data[name] = str(data[name])
        data["trust_source"] = self.trust_source.to_dict()
        return data


def read_envelope(manifest_path: Path) -> tuple[Path, Envelope]:
    path = envelope_path_for(manifest_path)
    try:
        data = read_untrusted(
            path,
            limit=ENVELOPE_MAX_BYTES,
            what="signature envelope",
            hint=f"do not trust it; re-sign: ftmanifest sign {manifest_path} --key KEY --replace",
        )
    except FileNotFoundError:
        raise E.UnsignedError(
            "manifest is not signed",
            path=str(manifest_path),
            expected=f"a signature envelope at {path}",
            observed="no envelope",
            hint=f"sign it: ftmanifest sign {manifest_path} --key KEY",
        ) from None
    return path, parse_envelope(data, str(path))


@dataclass(frozen=True)
class Inspection:
    """What ``signers`` lists: the envelope, the trust file and why, the checks."""

    envelope_path: Path
    source: TrustSource | None
    trust: TrustStore | None
    checks: list[SignatureCheck]


def inspect_signatures(
    manifest_path: Path, *, trust_path: Path | None = None, now: datetime | None = None
) -> Inspection:
    """Every signature with its status, for listing; a missing trust file is not
    an error here when it was searched for (signatures are then listed
    unchecked).  Never parses the payload: that waits until the signatures are
    trusted."""
    env_path, envelope = read_envelope(manifest_path)
    try:
        source = choose_trust_file(manifest_path, trust_path)
        trust = load_trust(source.path)
    except E.TrustFileNotFoundError:
        if trust_path is not None:
            raise
        empty = TrustStore(path=Path("-"), keys=())
        return Inspection(env_path, None, None, check_signatures(envelope, empty, now_or(now)))
    return Inspection(env_path, source, trust, check_signatures(envelope, trust, now_or(now)))


SHOWN_CHANGES = 8  # changed fields named in one refusal (all are in ``changes``)
UNVOUCHED = (
    "; the manifest also differs from the envelope's payload (edited since signing, or "
    "the payload altered): what that says was signed is not shown, since no trusted "
    "signature vouches for it"
)


def changes_text(changes: Sequence[Change]) -> str:
    """``training.lr: signed 0.0002, now 0.0003; ...`` (the first few; unescaped)."""
    parts = [
        f"{c.field or '(whole manifest)'}: signed {shown_value(c.old, absent=c.kind == 'added')}"
        f", now {shown_value(c.new, absent=c.kind == 'removed')}"
        for c in changes[:SHOWN_CHANGES]
    ]
    more = len(changes) - SHOWN_CHANGES
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def verify_manifest_signature(
    manifest_path: Path,
    canonical: dict[str, Any] | bytes,
    *,
    trust_path: Path | None = None,
    threshold: int = 1,
    now: datetime | None = None,
) -> SignatureReport:
    """Verify ``manifest_path``'s envelope; return the report or raise a signing error.

    ``canonical``: the manifest's canonical data, or its RFC 8785 bytes.
    """
    if threshold < 1:
        raise UsageError("--threshold must be at least 1", observed=str(threshold))
    env_path, envelope = read_envelope(manifest_path)
    source = choose_trust_file(manifest_path, trust_path)
    trust = load_trust(source.path)
    disk_payload = statement_payload(manifest_path.name, canonical)
    try:
        verified = verify_envelope(
            envelope,
            trust=trust,
            threshold=threshold,
            expect=EXPECT,
            wording=WORDING,
            now=now,
            path=env_path,
        )
    except E.SignatureRefusedError as exc:
        if envelope.payload != disk_payload:  # compared, never parsed: it is not vouched for
            exc.payload_unvouched = True
            exc.message += UNVOUCHED
            exc.args = (exc.message,)
        raise
    statement = manifest_statement(verified.statement, str(env_path))
    if envelope.payload != disk_payload:  # fast path: one canonicalisation when all is well
        data = json.loads(canonical) if isinstance(canonical, bytes) else canonical
        _explain_difference(statement, manifest_path, env_path, data)
    return SignatureReport(
        manifest_path=manifest_path,
        envelope_path=env_path,
        trust_path=trust.path,
        trust_source=source,
        subject_name=statement.subject_name,
        digest=f"sha256:{statement.digest_hex}",
        threshold=threshold,
        signatures=verified.verdict.signatures,
        valid_keyids=verified.verdict.valid_keyids,
    )


def _explain_difference(
    statement: Statement, manifest_path: Path, env_path: Path, canonical: dict[str, Any]
) -> None:
    """The signed payload is not byte-identical to what we would sign now: raise
    the precise refusal, or return if it is only a non-canonical serialisation
    of the same statement (another DSSE tool)."""
    signed_hex = statement.predicate_digest_hex(str(env_path))
    if signed_hex != statement.digest_hex:
        raise E.PayloadMismatchError(
            "signed statement is inconsistent: its subject digest is not the digest "
            "of its predicate",
            path=str(env_path),
            field="subject[0].digest.sha256",
            expected=f"sha256:{signed_hex}",
            observed=f"sha256:{statement.digest_hex}",
            hint="the signer's tool is broken or the statement was forged; re-sign with "
            "`ftmanifest sign M --key K --replace`",
        )
    disk_hex = manifest_digest_hex(canonical)
    if disk_hex != statement.digest_hex:
        # the signatures verified over this payload, so its values may be shown
        changes = tuple(diff_values(statement.predicate, canonical))
        changed = E.ManifestChangedError(
            "manifest values changed after signing: "
            + (changes_text(changes) or "(whole manifest)"),
            path=str(manifest_path),
            field=(changes[0].field if changes else "") or "(whole manifest)",
            expected=f"sha256:{statement.digest_hex} (as signed)",
            observed=f"sha256:{disk_hex} (on disk)",
            hint="undo the edit, or have the change reviewed and signed again: "
            f"ftmanifest sign {manifest_path} --key KEY --replace",
        )
        changed.changes = changes
        raise changed
    if statement.subject_name != manifest_path.name:
        raise E.PayloadMismatchError(
            "signature was made for a manifest with another file name",
            path=str(env_path),
            field="subject[0].name",
            expected=manifest_path.name,
            observed=statement.subject_name,
            hint="rename the manifest back, or sign it under its new name with --replace",
        )
