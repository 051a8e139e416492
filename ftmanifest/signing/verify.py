"""Verify a manifest's signature envelope against the trusted signers.

Layer: signing (reads the envelope and trust file; judging is pure).
Order, strictly: parse the envelope -> verify every signature over the PAE of
the exact payload bytes with the trusted keys -> count distinct trusted keys
against the threshold -> only then parse the payload -> compare it with the
canonical manifest on disk.  Each failure raises its own error class.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature

from ftmanifest.errors import UsageError
from ftmanifest.manifest.canonical import canonical_json
from ftmanifest.signing import errors as E
from ftmanifest.signing._files import ENVELOPE_MAX_BYTES, read_untrusted
from ftmanifest.signing.dsse import Envelope, parse_envelope
from ftmanifest.signing.locate import TrustSource, choose_trust_file
from ftmanifest.signing.sign import envelope_path_for
from ftmanifest.signing.statement import (
    Statement,
    manifest_digest_hex,
    parse_statement,
    statement_payload,
)
from ftmanifest.signing.trust import STATUS_OK, TrustStore, load_trust

_STATUS_ERRORS: dict[str, type[E.SignatureRefusedError]] = {
    "unknown-key": E.UnknownKeyError,
    "bad-signature": E.BadSignatureError,
    "wrong-namespace": E.WrongNamespaceError,
    "expired-key": E.ExpiredKeyError,
    "not-yet-valid": E.NotYetValidKeyError,
}
_HINTS = {
    "unknown-key": "if you trust this signer, add their key to the trust file "
    '(`PRINCIPAL namespaces="ftmanifest" ssh-ed25519 KEY`); if the key was revoked, '
    "ask for a new signature",
    "bad-signature": "do not use this manifest: the envelope was altered after signing; "
    "ask the signer to sign again",
    "wrong-namespace": 'add namespaces="ftmanifest" to this key\'s line in the trust file',
    "expired-key": "the key's valid-before has passed: ask for a signature with a current key, "
    "or extend valid-before in the trust file",
    "not-yet-valid": "the key's valid-after is in the future: check the trust file and clock",
}


@dataclass(frozen=True)
class SignatureCheck:
    """One signature of the envelope and what became of it."""

    index: int
    keyid: str
    status: str  # "valid" or a reason code (unknown-key, bad-signature...)
    verifies: bool | None  # None: no trusted key to check it with
    principals: tuple[str, ...]
    detail: str


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


def check_signatures(envelope: Envelope, trust: TrustStore, now: datetime) -> list[SignatureCheck]:
    """Verify every signature cryptographically, then judge its key's trust."""
    message = envelope.pae()
    checks = []
    for n, sig in enumerate(envelope.signatures):
        entries = trust.by_fingerprint(sig.keyid)
        if not entries:
            checks.append(
                SignatureCheck(n, sig.keyid, "unknown-key", None, (), "key not in trust file")
            )
            continue
        principals = tuple(dict.fromkeys(p for k in entries for p in k.principals))
        try:
            entries[0].public_key().verify(sig.sig, message)
        except InvalidSignature:
            detail = "signature does not verify over the payload"
            checks.append(SignatureCheck(n, sig.keyid, "bad-signature", False, principals, detail))
            continue
        statuses = [k.status(now) for k in entries]
        status = STATUS_OK if STATUS_OK in statuses else statuses[0]
        where = ", ".join(f"line {k.line}" for k in entries)
        checks.append(SignatureCheck(n, sig.keyid, status, True, principals, f"trust {where}"))
    return checks


def _refusal(check: SignatureCheck, env_path: Path, trust: TrustStore) -> E.SignatureRefusedError:
    who = f" ({', '.join(check.principals)})" if check.principals else ""
    return _STATUS_ERRORS[check.status](
        f"signature {check.index} by {check.keyid}{who} refused: {check.status}: {check.detail}",
        path=str(env_path),
        field=f"signatures[{check.index}]",
        expected=f"a valid signature by a key trusted for ftmanifest in {trust.path}",
        observed=check.status,
        hint=_HINTS[check.status],
    )


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
        return Inspection(env_path, None, None, check_signatures(envelope, empty, _now(now)))
    return Inspection(env_path, source, trust, check_signatures(envelope, trust, _now(now)))


def _diff(a: Any, b: Any, where: str = "") -> list[str]:
    """Dotted paths at which two JSON values differ (first few only)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            sub = f"{where}.{key}" if where else key
            out += _diff(a[key], b[key], sub) if key in a and key in b else [sub]
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in _diff(x, y, f"{where}[{i}]")]
    return [] if canonical_json(a) == canonical_json(b) else [where or "(whole manifest)"]


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    return now if now.tzinfo is not None else now.astimezone()


def verify_manifest_signature(
    manifest_path: Path,
    canonical: dict[str, Any],
    *,
    trust_path: Path | None = None,
    threshold: int = 1,
    now: datetime | None = None,
) -> SignatureReport:
    """Verify ``manifest_path``'s envelope; return the report or raise a signing error."""
    if threshold < 1:
        raise UsageError("--threshold must be at least 1", observed=str(threshold))
    env_path, envelope = read_envelope(manifest_path)
    source = choose_trust_file(manifest_path, trust_path)
    trust = load_trust(source.path)
    checks = check_signatures(envelope, trust, _now(now))
    for check in checks:
        if check.status == "bad-signature":
            raise _refusal(check, env_path, trust)
    valid = tuple(dict.fromkeys(c.keyid for c in checks if c.status == STATUS_OK))
    if len(valid) < threshold:
        rejected = [c for c in checks if c.status != STATUS_OK]
        if not valid and rejected:
            raise _refusal(rejected[0], env_path, trust)
        raise E.ThresholdNotMetError(
            f"{len(valid)} distinct trusted key(s) signed, {threshold} required "
            f"({len(checks)} signature(s); a key that signs twice counts once)",
            path=str(env_path),
            expected=f"valid signatures by at least {threshold} distinct trusted keys",
            observed="; ".join(f"{c.keyid}: {c.status}" for c in checks),
            hint="ask another trusted signer to run `ftmanifest sign M --key THEIR_KEY`",
        )
    statement = parse_statement(envelope.payload, str(env_path))
    disk_payload = statement_payload(manifest_path.name, canonical)
    if envelope.payload != disk_payload:  # fast path: one canonicalisation when all is well
        _explain_difference(statement, manifest_path, env_path, canonical)
    return SignatureReport(
        manifest_path=manifest_path,
        envelope_path=env_path,
        trust_path=trust.path,
        trust_source=source,
        subject_name=statement.subject_name,
        digest=f"sha256:{statement.digest_hex}",
        threshold=threshold,
        signatures=tuple(checks),
        valid_keyids=valid,
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
        fields = _diff(statement.predicate, canonical) or ["(whole manifest)"]
        shown = ", ".join(fields[:8]) + (f" and {len(fields) - 8} more" if len(fields) > 8 else "")
        raise E.ManifestChangedError(
            f"manifest values changed after signing: {shown}",
            path=str(manifest_path),
            field=fields[0],
            expected=f"sha256:{statement.digest_hex} (as signed)",
            observed=f"sha256:{disk_hex} (on disk)",
            hint="undo the edit, or have the change reviewed and signed again: "
            f"ftmanifest sign {manifest_path} --key KEY --replace",
        )
    if statement.subject_name != manifest_path.name:
        raise E.PayloadMismatchError(
            "signature was made for a manifest with another file name",
            path=str(env_path),
            field="subject[0].name",
            expected=manifest_path.name,
            observed=statement.subject_name,
            hint="rename the manifest back, or sign it under its new name with --replace",
        )
