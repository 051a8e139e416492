"""Sign and verify any in-toto statement in a DSSE envelope: the one API.

Layer: signing (pure: bytes and loaded trust in, envelopes and verdicts out;
where envelopes live on disk is each caller's business).  The manifest
signature (``sign``, ``verify``) is the first client; adapter bindings, backup
indexes, preflight records and ledger entries use the same calls with their
own subjects and predicate types.

    sign_statement(subjects, predicate_type, predicate, key) -> Envelope
    cosign(envelope, key) -> Envelope
    verify_statement(envelope_bytes, *, trust, threshold=1,
                     expected_predicate_type=None, subject_count=None,
                     now=None, path="-") -> VerifiedStatement

Verification order, strictly: parse the envelope -> verify every signature over
the PAE of the exact payload bytes with the trusted keys -> count distinct
trusted keys against the threshold -> only then parse the payload and check its
predicate type and subjects.  Each failure raises its own error class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ftmanifest.errors import UsageError
from ftmanifest.signing._files import ENVELOPE_MAX_BYTES
from ftmanifest.signing.dsse import (
    MAX_SIGNATURES,
    PAYLOAD_TYPE,
    Envelope,
    Signature,
    pae,
    parse_envelope,
)
from ftmanifest.signing.errors import FileTooLargeError, TooManySignaturesError
from ftmanifest.signing.intoto import (
    RESIGN_HINT,
    Expect,
    Statement,
    Subject,
    decode_statement,
    statement_bytes,
)
from ftmanifest.signing.judge import (
    SignatureCheck,
    Wording,
    check_signatures,
    now_or,
    require_trusted,
)
from ftmanifest.signing.keys import PrivateKey, fingerprint, sign_message
from ftmanifest.signing.trust import TrustStore


def sign_payload(payload: bytes, key: PrivateKey) -> Signature:
    """One DSSE signature (Ed25519, or ECDSA P-256 with SHA-256, over the PAE)
    with the key's OpenSSH fingerprint."""
    message = pae(PAYLOAD_TYPE, payload)
    return Signature(keyid=fingerprint(key.public_key()), sig=sign_message(key, message))


def sign_statement(
    subjects: Sequence[Subject],
    predicate_type: str,
    predicate: dict[str, Any],
    key: PrivateKey,
) -> Envelope:
    """A new envelope over the canonical statement, signed by ``key``.

    Ed25519 is deterministic, so the same inputs give the same bytes
    (``Envelope.to_bytes``); ECDSA is not.  A bad subject or predicate is a caller bug
    (``ValueError``).
    """
    payload = statement_bytes(subjects, predicate_type, predicate)
    return Envelope(PAYLOAD_TYPE, payload, (sign_payload(payload, key),))


def cosign(envelope: Envelope, key: PrivateKey) -> Envelope:
    """``envelope`` with ``key``'s signature appended (author, then reviewer);
    unchanged when ``key`` already signed it.  Does not judge the existing
    signatures: verification does that."""
    new = sign_payload(envelope.payload, key)
    if any(s.keyid == new.keyid for s in envelope.signatures):
        return envelope
    if len(envelope.signatures) >= MAX_SIGNATURES:
        raise TooManySignaturesError(
            f"the envelope already holds {len(envelope.signatures)} signatures",
            expected=f"at most {MAX_SIGNATURES} signatures",
            observed=str(len(envelope.signatures)),
            hint="start a new envelope; no review needs this many signers",
        )
    return Envelope(envelope.payload_type, envelope.payload, (*envelope.signatures, new))


@dataclass(frozen=True)
class SignatureVerdict:
    """What the signatures established: every check and the trusted keys counted."""

    trust_path: Path
    threshold: int
    signatures: tuple[SignatureCheck, ...]
    valid_keyids: tuple[str, ...]  # distinct trusted keys with valid signatures


@dataclass(frozen=True)
class VerifiedStatement:
    """A statement whose signatures met the threshold: what exactly was signed."""

    statement: Statement
    payload: bytes  # the exact signed bytes
    verdict: SignatureVerdict

    @property
    def subjects(self) -> tuple[Subject, ...]:
        return self.statement.subjects

    @property
    def predicate_type(self) -> str:
        return self.statement.predicate_type

    @property
    def predicate(self) -> dict[str, Any]:
        return self.statement.predicate


def verify_envelope(
    envelope: Envelope,
    *,
    trust: TrustStore,
    threshold: int = 1,
    expect: Expect | None = None,
    wording: Wording | None = None,
    now: datetime | None = None,
    path: Path | str = "-",
) -> VerifiedStatement:
    """``verify_statement`` for an envelope already parsed (and so read from
    its file, whose absence each caller words itself)."""
    if threshold < 1:
        raise UsageError("--threshold must be at least 1", observed=str(threshold))
    wording = wording or Wording()
    checks = check_signatures(envelope, trust, now_or(now))
    valid = require_trusted(checks, threshold, env_path=path, trust=trust, wording=wording)
    statement = decode_statement(envelope.payload, str(path), expect or Expect())
    verdict = SignatureVerdict(trust.path, threshold, tuple(checks), valid)
    return VerifiedStatement(statement=statement, payload=envelope.payload, verdict=verdict)


def verify_statement(
    envelope_bytes: bytes,
    *,
    trust: TrustStore,
    threshold: int = 1,
    expected_predicate_type: str | None = None,
    subject_count: int | None = None,
    resign_hint: str = RESIGN_HINT,
    now: datetime | None = None,
    path: Path | str = "-",
) -> VerifiedStatement:
    """Verify envelope file bytes; return what was signed or raise a signing error.

    ``expected_predicate_type`` None accepts any kind of statement: pass the
    type you are about to act on.  The subjects are returned, not compared:
    the caller hashes its files and compares (``Statement.digest_of``).
    """
    if threshold < 1:
        raise UsageError("--threshold must be at least 1", observed=str(threshold))
    if len(envelope_bytes) > ENVELOPE_MAX_BYTES:
        raise FileTooLargeError(
            f"the signature envelope is larger than {ENVELOPE_MAX_BYTES} bytes",
            path=str(path),
            expected=f"at most {ENVELOPE_MAX_BYTES} bytes",
            observed=f"{len(envelope_bytes)} bytes",
            hint="do not trust it; ask for the statement to be signed again",
        )
    envelope = parse_envelope(envelope_bytes, str(path))
    expect = Expect(expected_predicate_type, subject_count, resign_hint)
    return verify_envelope(
        envelope, trust=trust, threshold=threshold, expect=expect, now=now, path=path
    )
