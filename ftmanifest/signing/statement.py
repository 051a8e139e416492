"""The in-toto Statement v1 that a manifest signature carries.

Layer: signing (pure).  Spec: https://github.com/in-toto/attestation
(spec/v1/statement.md).  subject = the manifest file name and the sha256 of
its RFC 8785 canonical JSON; predicate = that canonical manifest itself.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from ftmanifest.manifest.canonical import CanonicalizationError, canonical_json
from ftmanifest.signing._strict import StrictJSONError, loads_strict
from ftmanifest.signing.errors import MalformedPayloadError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://ftmanifest.dev/experiment/v1"
_FIELDS = frozenset({"_type", "subject", "predicateType", "predicate"})
_HEX64 = re.compile(r"[0-9a-f]{64}")


def manifest_digest_hex(canonical: dict[str, Any]) -> str:
    """Hex sha256 of the canonical JSON of a manifest."""
    return hashlib.sha256(canonical_json(canonical)).hexdigest()


def build_statement(subject_name: str, canonical: dict[str, Any]) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject_name, "digest": {"sha256": manifest_digest_hex(canonical)}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": canonical,
    }


def statement_payload(subject_name: str, canonical: dict[str, Any]) -> bytes:
    """The exact payload bytes that get signed: the statement in canonical JSON.

    Equal to ``canonical_json(build_statement(...))`` but canonicalises the
    manifest once: RFC 8785 orders the statement's keys ``_type``,
    ``predicate``, ``predicateType``, ``subject``.
    """
    predicate = canonical_json(canonical)
    subject = [{"name": subject_name, "digest": {"sha256": hashlib.sha256(predicate).hexdigest()}}]
    return b"".join(
        [
            b'{"_type":',
            canonical_json(STATEMENT_TYPE),
            b',"predicate":',
            predicate,
            b',"predicateType":',
            canonical_json(PREDICATE_TYPE),
            b',"subject":',
            canonical_json(subject),
            b"}",
        ]
    )


@dataclass(frozen=True)
class Statement:
    subject_name: str
    digest_hex: str
    predicate: dict[str, Any]

    def predicate_digest_hex(self, path: str) -> str:
        try:
            return manifest_digest_hex(self.predicate)
        except CanonicalizationError as exc:
            raise _bad(path, f"predicate has no canonical form: {exc}", "predicate") from None


def _bad(path: str, what: str, field: str | None = None) -> MalformedPayloadError:
    return MalformedPayloadError(
        f"signed payload is not an ftmanifest statement: {what}",
        path=path,
        field=field,
        expected=f"an in-toto Statement v1 with predicateType {PREDICATE_TYPE} "
        "and exactly one subject",
        observed=what,
        hint="the signer used another tool or format; re-sign with "
        "`ftmanifest sign M --key K --replace`",
    )


def parse_statement(payload: bytes, path: str) -> Statement:
    """Parse verified payload bytes strictly (duplicate keys and NaN refused)."""
    try:
        doc = loads_strict(payload)
    except StrictJSONError as exc:
        raise _bad(path, f"not strict JSON: {exc}") from None
    if not isinstance(doc, dict) or set(doc) != _FIELDS:
        shape = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise _bad(path, f"fields are {shape}, expected {sorted(_FIELDS)}")
    if doc["_type"] != STATEMENT_TYPE:
        raise _bad(path, f"_type is {doc['_type']!r}", "_type")
    if doc["predicateType"] != PREDICATE_TYPE:
        raise _bad(path, f"predicateType is {doc['predicateType']!r}", "predicateType")
    subjects = doc["subject"]
    if not isinstance(subjects, list) or len(subjects) != 1:
        raise _bad(path, "subject must be a list with exactly one entry", "subject")
    subject = subjects[0]
    if not isinstance(subject, dict) or set(subject) != {"name", "digest"}:
        raise _bad(path, "subject[0] must have exactly name and digest", "subject[0]")
    name, digest = subject["name"], subject["digest"]
    if not isinstance(name, str) or not name:
        raise _bad(path, "subject[0].name is not a non-empty string", "subject[0].name")
    if not isinstance(digest, dict) or set(digest) != {"sha256"}:
        raise _bad(path, "subject[0].digest must hold exactly sha256", "subject[0].digest")
    hex_digest = digest["sha256"]
    if not isinstance(hex_digest, str) or not _HEX64.fullmatch(hex_digest):
        raise _bad(path, "subject[0].digest.sha256 is not 64 lowercase hex", "subject[0].digest")
    predicate = doc["predicate"]
    if not isinstance(predicate, dict):
        raise _bad(path, "predicate is not an object", "predicate")
    return Statement(subject_name=name, digest_hex=hex_digest, predicate=predicate)
