"""What ranks send each other, as JSON data: errors, findings, digests, and their checks.

Layer: file access (pure: no I/O, no torch; below the rooms, so the data
room's cross-rank leakage check and distributed verify frame alike).
Nothing crosses between the ranks of a job as a pickle: an error
travels as its ``to_dict`` fields and is rebuilt here only as a class of the
allow-list ``ERRORS`` (an unknown name is a plain ``FtManifestError`` with
the message); a ``Finding`` or a ``FileDigest`` is rebuilt from fields whose
types were checked.  A value that does not fit raises ``Malformed``; the
caller turns it into ``bad_answer`` naming the rank it came from.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ftmanifest import errors, recordio
from ftmanifest.counts import RecordCountError
from ftmanifest.errors import EXIT_REFUSED, FtManifestError
from ftmanifest.findings import SEVERITY_ORDER, Finding
from ftmanifest.hashing import digests

if TYPE_CHECKING:
    from ftmanifest.hashing.digests import FileDigest


class RankTimeoutError(FtManifestError):
    """A rank did not join, or did not answer, before the deadline."""

    exit_code = EXIT_REFUSED
    reason = "rank-timeout"


class RankAnswerError(FtManifestError):
    """A rank answered with something no rank can use (too large, malformed)."""

    exit_code = EXIT_REFUSED
    reason = "rank-answer"


def bad_answer(rank: int, what: str, expected: str, observed: str = "") -> RankAnswerError:
    """The refusal for rank ``rank``'s answer while gathering ``what``: it is not ``expected``."""
    return RankAnswerError(
        f"rank {rank} sent an answer that is not {expected} while the ranks gathered {what}",
        field="ranks",
        expected=expected,
        observed=f"rank {rank}: {observed[:200]}" if observed else f"rank {rank}",
        hint="run the same ftmanifest version on every rank; a rank that sends something "
        "else is broken or not one of yours",
    )


class Malformed(ValueError):
    """A received value is not what the step expects (``str`` says what is wrong)."""


def _allowed() -> dict[str, type[FtManifestError]]:
    classes: list[type[FtManifestError]] = [
        errors.FtManifestError,
        errors.UsageError,
        errors.InputError,
        errors.InputNotFoundError,
        errors.ManifestError,
        errors.UnsupportedVersionError,
        errors.RefusedError,
        errors.ResourceError,
        errors.WorkerDiedError,
        digests.FileChangedError,
        digests.UnreadableFileError,
        digests.SymlinkEscapeError,
        RecordCountError,
        recordio.RecordReadError,
        recordio.MalformedRecordError,
        recordio.RecordEncodingError,
        recordio.RecordTooLargeError,
        recordio.UnsupportedFormatError,
        RankAnswerError,
        RankTimeoutError,
    ]
    return {c.__name__: c for c in classes}


_TEXT = ("message", "path", "field", "expected", "observed", "hint")
_INTS = ("line", "column")


def error_to_wire(exc: BaseException) -> dict[str, Any]:
    """The error as JSON-able fields (a non-ftmanifest error becomes its text)."""
    if not isinstance(exc, FtManifestError):
        return {"error": "FtManifestError", "message": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"error": type(exc).__name__}
    out.update({k: getattr(exc, k) for k in (*_TEXT, *_INTS)})
    found = getattr(exc, "digest", None)
    if isinstance(found, digests.FileDigest):  # a RecordCountError carries the file's digest
        out["digest"] = digest_to_wire(found)
    return out


def error_from_wire(value: Any) -> FtManifestError:
    """The error a rank sent, as a class of the allow-list; ``Malformed`` when it is not one."""
    if not isinstance(value, dict) or not isinstance(value.get("error"), str):
        raise Malformed("an error without its class name")
    for name in _TEXT:
        if not isinstance(value.get(name), (str, type(None))):
            raise Malformed(f"an error whose {name} is not text")
    for name in _INTS:
        if not _int_or_none(value.get(name)):
            raise Malformed(f"an error whose {name} is not a whole number")
    if value.get("message") is None:
        raise Malformed("an error without a message")
    cls = _allowed().get(value["error"])
    if cls is None:
        return FtManifestError(value["message"])
    get = value.get
    exc = cls(
        value["message"],
        path=get("path"),
        line=get("line"),
        column=get("column"),
        field=get("field"),
        expected=get("expected"),
        observed=get("observed"),
        hint=get("hint"),
    )
    if "digest" in value:
        if value["digest"] is not None and cls.__name__ != "RecordCountError":
            raise Malformed("a digest on an error that carries none")
        exc.digest = None if value["digest"] is None else digest_from_wire(value["digest"])  # type: ignore[attr-defined]
    return exc


def digest_to_wire(d: FileDigest) -> list[Any]:
    return [d.digest, d.size, d.records]


def digest_from_wire(value: Any) -> FileDigest:
    """A ``FileDigest`` from ``[digest, size, records]``, every field checked."""
    if not isinstance(value, list) or len(value) != 3:
        raise Malformed("a digest that is not [digest, size, records]")
    digest, size, records = value
    if not isinstance(digest, str) or not digests._DIGEST_RE.fullmatch(digest):
        raise Malformed(f"a digest that is not 'algorithm:hex': {str(digest)[:80]!r}")
    if not _int(size) or size < 0 or not _int_or_none(records) or (records or 0) < 0:
        raise Malformed("a digest whose size or record count is not a count")
    return digests.FileDigest(digest, size, records)


def finding_to_wire(f: Finding) -> dict[str, Any]:
    out = f._asdict()
    # as text of its own: the gather sorts keys, and the output keeps this order
    out["extra"] = json.dumps(dict(f.extra))
    return out


def finding_from_wire(value: Any) -> Finding:
    """A ``Finding`` from its fields, each of the type ``Finding`` declares."""
    if not isinstance(value, dict) or set(value) != set(Finding._fields):
        raise Malformed("a finding without exactly the fields of a finding")
    for name in ("kind", "rule", "message"):
        if not isinstance(value[name], str):
            raise Malformed(f"a finding whose {name} is not text")
    for name in ("path", "field", "expected", "observed", "hint", "fingerprint", "excerpt"):
        if not isinstance(value[name], (str, type(None))):
            raise Malformed(f"a finding whose {name} is not text")
    if not _int_or_none(value["line"]) or not _int_or_none(value["column"]):
        raise Malformed("a finding whose line or column is not a whole number")
    if value["severity"] not in SEVERITY_ORDER:
        raise Malformed(f"a finding of severity {str(value['severity'])[:40]!r}")
    try:
        extra = json.loads(value["extra"]) if isinstance(value["extra"], str) else None
    except (ValueError, RecursionError):
        extra = None
    if not isinstance(extra, dict):
        raise Malformed("a finding whose extra is not a mapping as JSON text")
    loc = value["loc"]
    if loc is not None:
        if not isinstance(loc, list) or not all(isinstance(p, str) or _int(p) for p in loc):
            raise Malformed("a finding whose loc is not a list of keys and indexes")
        loc = tuple(loc)
    return Finding(**{**value, "loc": loc, "extra": extra})


def list_of(value: Any, length: int | None = None) -> list[Any]:
    """``value`` when it is a list (of ``length`` items); ``Malformed`` otherwise."""
    if not isinstance(value, list):
        raise Malformed(f"a {type(value).__name__} where a list belongs")
    if length is not None and len(value) != length:
        raise Malformed(f"{len(value)} items where {length} belong")
    return value


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_none(value: Any) -> bool:
    return value is None or _int(value)
