"""The manifest statement: the first client of the generic statement signer.

Layer: signing (pure).  An in-toto Statement v1 (``intoto``) with one
subject, the manifest file name and the sha256 of its RFC 8785 canonical
JSON, predicate type ``https://ftmanifest.dev/experiment/v1``, and the
canonical manifest itself as the predicate.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ftmanifest.manifest.canonical import CanonicalizationError, canonical_json
from ftmanifest.signing.intoto import (
    STATEMENT_TYPE,
    Expect,
    Subject,
    decode_statement,
    encode_statement,
    payload_error,
)
from ftmanifest.signing.intoto import Statement as AnyStatement

__all__ = [
    "EXPECT",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "Statement",
    "build_statement",
    "manifest_digest_hex",
    "manifest_statement",
    "manifest_subject",
    "parse_statement",
    "statement_payload",
]

PREDICATE_TYPE = "https://ftmanifest.dev/experiment/v1"
EXPECT = Expect(
    predicate_type=PREDICATE_TYPE,
    subject_count=1,
    resign_hint="the signer used another tool or format; re-sign with "
    "`ftmanifest sign M --key K --replace`",
)


def manifest_digest_hex(canonical: dict[str, Any]) -> str:
    """Hex sha256 of the canonical JSON of a manifest."""
    return hashlib.sha256(canonical_json(canonical)).hexdigest()


def manifest_subject(subject_name: str, canonical: dict[str, Any]) -> Subject:
    return Subject(subject_name, {"sha256": manifest_digest_hex(canonical)})


def build_statement(subject_name: str, canonical: dict[str, Any]) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [manifest_subject(subject_name, canonical).to_dict()],
        "predicateType": PREDICATE_TYPE,
        "predicate": canonical,
    }


def statement_payload(subject_name: str, canonical: dict[str, Any] | bytes) -> bytes:
    """The exact payload bytes that get signed, canonicalising the manifest once.

    Equal to ``attest.sign_statement([manifest_subject(...)], PREDICATE_TYPE,
    canonical, key).payload``.  ``canonical``: the manifest's data, or its
    RFC 8785 bytes when the caller has them (``LoadedManifest.canonical_bytes``).
    """
    predicate = canonical if isinstance(canonical, bytes) else canonical_json(canonical)
    subject = Subject(subject_name, {"sha256": hashlib.sha256(predicate).hexdigest()})
    return encode_statement([subject], PREDICATE_TYPE, predicate)


@dataclass(frozen=True)
class Statement:
    """A verified manifest statement, seen as the manifest path needs it."""

    subject_name: str
    digest_hex: str
    predicate: dict[str, Any]

    def predicate_digest_hex(self, path: str) -> str:
        try:
            return manifest_digest_hex(self.predicate)
        except CanonicalizationError as exc:
            what = f"predicate has no canonical form: {exc}"
            raise payload_error(path, what, EXPECT, "predicate") from None


def manifest_statement(statement: AnyStatement, path: str) -> Statement:
    """The manifest view of a generic statement already checked against ``EXPECT``."""
    subject = statement.subjects[0]
    if set(subject.digest) != {"sha256"}:
        what = "subject[0].digest must hold exactly sha256"
        raise payload_error(path, what, EXPECT, "subject[0].digest")
    return Statement(subject.name, subject.digest["sha256"], statement.predicate)


def parse_statement(payload: bytes, path: str) -> Statement:
    """Parse verified payload bytes strictly (duplicate keys and NaN refused)."""
    return manifest_statement(decode_statement(payload, path, EXPECT), path)
