"""Judge an envelope's signatures against the trusted signers and a threshold.

Layer: signing (pure: takes a parsed envelope and a loaded trust store).
Shared by every signed statement.  Each signature is verified over the PAE of
the exact payload bytes with the trusted key its keyid names, then its key's
trust (namespace, validity) is judged; a signature that does not verify
refuses the whole envelope; distinct trusted keys are counted against the
threshold.  The payload is not looked at here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from cryptography.exceptions import InvalidSignature

from ftmanifest.signing import errors as E
from ftmanifest.signing.dsse import Envelope
from ftmanifest.signing.keys import verify_message
from ftmanifest.signing.trust import STATUS_OK, TrustStore

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
    "bad-signature": "do not use this {what}: the envelope was altered after signing; "
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
class Wording:
    """How refusals name what was signed and the next step."""

    what: str = "statement"
    cosign_hint: str = "ask another trusted signer to sign it too"


def now_or(now: datetime | None) -> datetime:
    """``now`` made time-zone aware (local time if naive), or the current UTC time."""
    if now is None:
        return datetime.now(timezone.utc)
    return now if now.tzinfo is not None else now.astimezone()


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
            verify_message(entries[0].public_key(), sig.sig, message)
        except InvalidSignature:
            detail = "signature does not verify over the payload"
            checks.append(SignatureCheck(n, sig.keyid, "bad-signature", False, principals, detail))
            continue
        statuses = [k.status(now) for k in entries]
        status = STATUS_OK if STATUS_OK in statuses else statuses[0]
        where = ", ".join(f"line {k.line}" for k in entries)
        checks.append(SignatureCheck(n, sig.keyid, status, True, principals, f"trust {where}"))
    return checks


def refusal(
    check: SignatureCheck, env_path: Path | str, trust: TrustStore, wording: Wording
) -> E.SignatureRefusedError:
    who = f" ({', '.join(check.principals)})" if check.principals else ""
    return _STATUS_ERRORS[check.status](
        f"signature {check.index} by {check.keyid}{who} refused: {check.status}: {check.detail}",
        path=str(env_path),
        field=f"signatures[{check.index}]",
        expected=f"a valid signature by a key trusted for ftmanifest in {trust.path}",
        observed=check.status,
        hint=_HINTS[check.status].format(what=wording.what),
    )


def require_trusted(
    checks: list[SignatureCheck],
    threshold: int,
    *,
    env_path: Path | str,
    trust: TrustStore,
    wording: Wording,
) -> tuple[str, ...]:
    """The distinct trusted key ids that signed validly, at least ``threshold``
    of them; else raise the refusal (a bad signature first, then the first
    rejected signature when none is valid, else ``ThresholdNotMetError``)."""
    for check in checks:
        if check.status == "bad-signature":
            raise refusal(check, env_path, trust, wording)
    valid = tuple(dict.fromkeys(c.keyid for c in checks if c.status == STATUS_OK))
    if len(valid) < threshold:
        rejected = [c for c in checks if c.status != STATUS_OK]
        if not valid and rejected:
            raise refusal(rejected[0], env_path, trust, wording)
        raise E.ThresholdNotMetError(
            f"{len(valid)} distinct trusted key(s) signed, {threshold} required "
            f"({len(checks)} signature(s); a key that signs twice counts once)",
            path=str(env_path),
            expected=f"valid signatures by at least {threshold} distinct trusted keys",
            observed="; ".join(f"{c.keyid}: {c.status}" for c in checks),
            hint=wording.cosign_hint,
        )
    return valid
