"""in-toto Statement v1, for any subjects and predicate type.

Layer: signing (pure).  Spec: https://github.com/in-toto/attestation
(spec/v1/statement.md, resource_descriptor.md for the digest set).  Every
signed statement ftmanifest makes -- the manifest, adapter bindings, backup
indexes, preflight records, ledger entries -- is one of these; they differ
only in their subjects and predicate.

The payload is the statement in RFC 8785 canonical JSON.  Parsing is strict
and happens only after the signatures were accepted (``attest``): duplicate
keys and NaN refused, exactly the four statement fields, a digest set of
known algorithms with lowercase hex of the right length, distinct subject
names, and an object as the predicate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ftmanifest.manifest.canonical import canonical_json
from ftmanifest.signing._strict import StrictJSONError, loads_strict
from ftmanifest.signing.errors import MalformedPayloadError, WrongPredicateTypeError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
DIGEST_HEX_LEN = {"sha256": 64, "sha384": 96, "sha512": 128}
"""Digest algorithms a subject may name (in-toto names), with their hex length.
Others are refused rather than ignored: a check that looks only for sha256
must never meet a subject it cannot judge."""
_FIELDS = frozenset({"_type", "subject", "predicateType", "predicate"})
_HEX = re.compile(r"[0-9a-f]+")
_COUNT_WORDS = {1: "one", 2: "two", 3: "three"}
RESIGN_HINT = "the signer used another tool or format; ask for a statement signed by ftmanifest"


def _digest_problem(digest: object) -> tuple[str, str] | None:
    """Why ``digest`` is not an acceptable in-toto digest set: (what, field suffix)."""
    if not isinstance(digest, dict) or not digest:
        return "digest is not a non-empty object", ".digest"
    for alg, value in digest.items():
        if alg not in DIGEST_HEX_LEN:
            return f"digest algorithm {alg!r} is not one of {sorted(DIGEST_HEX_LEN)}", ".digest"
        size = DIGEST_HEX_LEN[alg]
        if not isinstance(value, str) or len(value) != size or not _HEX.fullmatch(value):
            return f"digest.{alg} is not {size} lowercase hex", f".digest.{alg}"
    return None


@dataclass(frozen=True)
class Subject:
    """What a statement is about: a name and its digest set (``{"sha256": hex}``)."""

    name: str
    digest: dict[str, str] = field(hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"subject name must be a non-empty string, not {self.name!r}")
        problem = _digest_problem(self.digest)
        if problem is not None:
            raise ValueError(f"subject {self.name!r}: {problem[0]}")
        object.__setattr__(self, "digest", dict(self.digest))

    @classmethod
    def from_digest(cls, name: str, digest: str) -> Subject:
        """From our ``sha256:<hex>`` form (``hashing.hash_file(...).digest``)."""
        alg, sep, hex_digest = digest.partition(":")
        if not sep:
            raise ValueError(f"digest {digest!r} does not name its algorithm (alg:hex)")
        return cls(name, {alg: hex_digest})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "digest": dict(self.digest)}


@dataclass(frozen=True)
class Statement:
    """A parsed statement: which subjects, which predicate type, which predicate."""

    subjects: tuple[Subject, ...]
    predicate_type: str
    predicate: dict[str, Any]

    def digest_of(self, name: str, algorithm: str = "sha256") -> str | None:
        """``alg:hex`` the statement gives subject ``name``, or None if it names none."""
        for subject in self.subjects:
            if subject.name == name and algorithm in subject.digest:
                return f"{algorithm}:{subject.digest[algorithm]}"
        return None


def check_subjects(subjects: Sequence[Subject]) -> tuple[Subject, ...]:
    """At least one subject, distinct names (a name must select one digest set)."""
    if not subjects:
        raise ValueError("a statement needs at least one subject")
    names = [s.name for s in subjects]
    if len(set(names)) != len(names):
        raise ValueError(f"subject names repeat: {names}")
    return tuple(subjects)


def encode_statement(
    subjects: Sequence[Subject], predicate_type: str, predicate_json: bytes
) -> bytes:
    """The exact payload bytes to sign: the statement in canonical JSON.

    ``predicate_json`` is the predicate already in canonical JSON, so a caller
    that also digests the predicate canonicalises it once.  RFC 8785 orders the
    statement's keys ``_type``, ``predicate``, ``predicateType``, ``subject``.
    """
    if not isinstance(predicate_type, str) or not predicate_type:
        raise ValueError("predicate type must be a non-empty string (a URI)")
    if not predicate_json.startswith(b"{"):
        raise ValueError("the predicate must be a JSON object")
    subject_list = [s.to_dict() for s in check_subjects(subjects)]
    return b"".join(
        [
            b'{"_type":',
            canonical_json(STATEMENT_TYPE),
            b',"predicate":',
            predicate_json,
            b',"predicateType":',
            canonical_json(predicate_type),
            b',"subject":',
            canonical_json(subject_list),
            b"}",
        ]
    )


def statement_bytes(
    subjects: Sequence[Subject], predicate_type: str, predicate: dict[str, Any]
) -> bytes:
    """``encode_statement`` for a predicate given as a JSON-like dict."""
    return encode_statement(subjects, predicate_type, canonical_json(predicate))


@dataclass(frozen=True)
class Expect:
    """What a caller requires of a statement, and how refusals are worded."""

    predicate_type: str | None = None
    """None accepts any type; only for tools that list statements of every kind."""
    subject_count: int | None = None
    """Exactly this many subjects; None: one or more."""
    resign_hint: str = RESIGN_HINT

    def describe(self) -> str:
        text = "an in-toto Statement v1"
        if self.predicate_type is not None:
            text += f" with predicateType {self.predicate_type}"
        if self.subject_count is not None:
            n = self.subject_count
            text += f" and exactly {_COUNT_WORDS.get(n, str(n))} subject{'s' if n != 1 else ''}"
        return text


def payload_error(
    path: str, what: str, expect: Expect, field: str | None = None
) -> MalformedPayloadError:
    return MalformedPayloadError(
        f"signed payload is not a statement ftmanifest accepts: {what}",
        path=path,
        field=field,
        expected=expect.describe(),
        observed=what,
        hint=expect.resign_hint,
    )


def _subjects(raw: object, path: str, expect: Expect) -> tuple[Subject, ...]:
    n = expect.subject_count
    if n is not None and (not isinstance(raw, list) or len(raw) != n):
        count = _COUNT_WORDS.get(n, str(n))
        entries = "entry" if n == 1 else "entries"
        raise payload_error(
            path, f"subject must be a list with exactly {count} {entries}", expect, "subject"
        )
    if not isinstance(raw, list) or not raw:
        raise payload_error(path, "subject must be a non-empty list", expect, "subject")
    out: list[Subject] = []
    for i, item in enumerate(raw):
        where = f"subject[{i}]"
        if not isinstance(item, dict) or set(item) != {"name", "digest"}:
            raise payload_error(path, f"{where} must have exactly name and digest", expect, where)
        name = item["name"]
        if not isinstance(name, str) or not name:
            raise payload_error(
                path, f"{where}.name is not a non-empty string", expect, f"{where}.name"
            )
        problem = _digest_problem(item["digest"])
        if problem is not None:
            raise payload_error(path, f"{where}.{problem[0]}", expect, where + problem[1])
        if any(s.name == name for s in out):
            raise payload_error(path, f"{where}.name repeats {name!r}", expect, f"{where}.name")
        out.append(Subject(name, item["digest"]))
    return tuple(out)


def decode_statement(payload: bytes, path: str, expect: Expect) -> Statement:
    """Parse verified payload bytes strictly; raise ``MalformedPayloadError``
    (or its ``WrongPredicateTypeError``) naming the defect."""
    try:
        doc = loads_strict(payload)
    except StrictJSONError as exc:
        raise payload_error(path, f"not strict JSON: {exc}", expect) from None
    if not isinstance(doc, dict) or set(doc) != _FIELDS:
        shape = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise payload_error(path, f"fields are {shape}, expected {sorted(_FIELDS)}", expect)
    if doc["_type"] != STATEMENT_TYPE:
        raise payload_error(path, f"_type is {doc['_type']!r}", expect, "_type")
    predicate_type = doc["predicateType"]
    if not isinstance(predicate_type, str) or not predicate_type:
        raise payload_error(
            path, "predicateType is not a non-empty string", expect, "predicateType"
        )
    if expect.predicate_type is not None and predicate_type != expect.predicate_type:
        raise WrongPredicateTypeError(
            f"signed statement has predicateType {predicate_type!r}, "
            f"expected {expect.predicate_type!r}",
            path=path,
            field="predicateType",
            expected=expect.predicate_type,
            observed=predicate_type,
            hint="this envelope signs another kind of statement; use the envelope made "
            "for this purpose",
        )
    subjects = _subjects(doc["subject"], path, expect)
    predicate = doc["predicate"]
    if not isinstance(predicate, dict):
        raise payload_error(path, "predicate is not an object", expect, "predicate")
    return Statement(subjects=subjects, predicate_type=predicate_type, predicate=predicate)
