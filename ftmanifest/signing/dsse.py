"""DSSE v1 envelopes: pre-authentication encoding and a strict parser.

Layer: signing (pure).  Spec: https://github.com/secure-systems-lab/dsse
(envelope.md, protocol.md).  The envelope file is written as RFC 8785
canonical JSON plus one newline, and the parser accepts only that exact byte
form, so any edit to the file -- even whitespace -- is detected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ftmanifest.manifest.canonical import CanonicalizationError, canonical_json
from ftmanifest.signing._strict import StrictJSONError, b64decode_strict, b64encode, loads_strict
from ftmanifest.signing.errors import (
    MalformedEnvelopeError,
    MalformedKeyIdError,
    TooManySignaturesError,
    WrongPayloadTypeError,
)
from ftmanifest.signing.keys import check_keyid

PAYLOAD_TYPE = "application/vnd.in-toto+json"
ED25519_SIGNATURE_LEN = 64
ECDSA_P256_DER_MAX = 72
"""A DER ECDSA P-256 signature: SEQUENCE of two INTEGERs of at most 33 bytes."""
MAX_SIGNATURES = 64
"""More signers than any review needs; bounds the work an envelope can cause."""
_TOP_FIELDS = frozenset({"payloadType", "payload", "signatures"})
_SIG_FIELDS = frozenset({"keyid", "sig"})
_RESIGN = "re-sign the manifest: ftmanifest sign M --key K --replace"


def pae(payload_type: str, payload: bytes) -> bytes:
    """``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body``; LEN counts UTF-8 bytes."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)


@dataclass(frozen=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "payloadType": self.payload_type,
            "payload": b64encode(self.payload),
            "signatures": [{"keyid": s.keyid, "sig": b64encode(s.sig)} for s in self.signatures],
        }

    def to_bytes(self) -> bytes:
        """The one byte form of this envelope on disk."""
        return canonical_json(self.to_dict()) + b"\n"

    def pae(self) -> bytes:
        return pae(self.payload_type, self.payload)


def _malformed(path: str, what: str, *, field: str | None = None) -> MalformedEnvelopeError:
    return MalformedEnvelopeError(
        f"signature envelope is malformed: {what}",
        path=path,
        field=field,
        expected="a DSSE v1 envelope written by `ftmanifest sign` (canonical JSON)",
        observed=what,
        hint=f"the file was edited or corrupted; do not trust it, {_RESIGN}",
    )


def _b64_field(value: Any, path: str, field: str) -> bytes:
    if not isinstance(value, str):
        raise _malformed(path, f"{field} is {type(value).__name__}, not a string", field=field)
    try:
        return b64decode_strict(value)
    except ValueError as exc:
        raise _malformed(path, f"{field}: {exc}", field=field) from None


def _signature_shaped(sig: bytes) -> bool:
    """64 bytes (Ed25519), or a DER SEQUENCE whose length byte matches (ECDSA);
    the verifier of the key the keyid names judges the rest."""
    if len(sig) == ED25519_SIGNATURE_LEN:
        return True
    return 8 <= len(sig) <= ECDSA_P256_DER_MAX and sig[0] == 0x30 and sig[1] == len(sig) - 2


def parse_envelope(data: bytes, path: str) -> Envelope:
    """Parse envelope file bytes strictly; raise a signing error naming the defect.

    Order: JSON (no duplicate keys, NaN) -> exact fields and types -> strict
    base64 -> payload type -> canonical byte form.
    """
    try:
        doc = loads_strict(data)
    except StrictJSONError as exc:
        raise _malformed(path, f"not strict JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _malformed(path, f"top level is {type(doc).__name__}, not an object")
    if set(doc) != _TOP_FIELDS:
        extra = sorted(set(doc) - _TOP_FIELDS)
        missing = sorted(_TOP_FIELDS - set(doc))
        raise _malformed(path, f"unknown fields {extra}, missing fields {missing}")
    payload_type = doc["payloadType"]
    if not isinstance(payload_type, str):
        raise _malformed(path, "payloadType is not a string", field="payloadType")
    payload = _b64_field(doc["payload"], path, "payload")
    raw_sigs = doc["signatures"]
    if not isinstance(raw_sigs, list) or not raw_sigs:
        raise _malformed(path, "signatures is not a non-empty list", field="signatures")
    if len(raw_sigs) > MAX_SIGNATURES:
        raise TooManySignaturesError(
            f"signature envelope holds {len(raw_sigs)} signatures, at most "
            f"{MAX_SIGNATURES} are read",
            path=path,
            field="signatures",
            expected=f"at most {MAX_SIGNATURES} signatures",
            observed=str(len(raw_sigs)),
            hint=f"do not trust this envelope; {_RESIGN}",
        )
    sigs: list[Signature] = []
    for n, item in enumerate(raw_sigs):
        field = f"signatures[{n}]"
        if not isinstance(item, dict) or set(item) != _SIG_FIELDS:
            raise _malformed(path, f"{field} must be an object with keyid and sig", field=field)
        keyid = item["keyid"]
        if not isinstance(keyid, str) or not keyid:
            raise _malformed(path, f"{field}.keyid is not a non-empty string", field=field)
        if not check_keyid(keyid):
            raise MalformedKeyIdError(
                f"{field}.keyid is not an OpenSSH SHA256 key fingerprint",
                path=path,
                field=f"{field}.keyid",
                expected="SHA256: and 43 base64 characters (as `ssh-keygen -l` prints)",
                observed=keyid[:80],
                hint=f"do not trust this envelope; {_RESIGN}",
            )
        sig = _b64_field(item["sig"], path, f"{field}.sig")
        if not _signature_shaped(sig):
            raise _malformed(
                path,
                f"{field}.sig is {len(sig)} bytes, an Ed25519 signature is 64 and an "
                f"ECDSA P-256 one a DER SEQUENCE of at most {ECDSA_P256_DER_MAX}",
                field=field,
            )
        sigs.append(Signature(keyid=keyid, sig=sig))
    if payload_type != PAYLOAD_TYPE:
        raise WrongPayloadTypeError(
            "signature envelope has the wrong payload type (altered after signing?)",
            path=path,
            field="payloadType",
            expected=PAYLOAD_TYPE,
            observed=payload_type,
            hint=f"do not trust this envelope; {_RESIGN}",
        )
    envelope = Envelope(payload_type=payload_type, payload=payload, signatures=tuple(sigs))
    try:
        canonical = envelope.to_bytes()
    except CanonicalizationError as exc:  # e.g. a lone surrogate in a keyid
        raise _malformed(path, f"not representable as canonical JSON: {exc}") from None
    if canonical != data:
        raise _malformed(path, "not in canonical form (whitespace, order or escapes changed)")
    return envelope
