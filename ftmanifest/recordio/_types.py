"""What the record reader yields and how it refuses: ``Record``, ``Limits``, errors.

Layer: file access - edge support (pure; no I/O here).  A record's text fields are its
string leaves with their key path, walked without recursion so a deeply nested value
cannot overflow the stack.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError
from ftmanifest.manifest.jsonkeys import unique_keys

FieldPath = tuple[str | int, ...]
"""Keys and list indices from a record's top down to one value: ``("messages", 0, "content")``."""

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds that keep a huge or endless input from exhausting memory.

    ``record_bytes``: one JSONL/text line or one CSV/TSV row (all its physical
    lines).  ``document_bytes``: a whole ``.json`` file, parsed at once.
    ``total_bytes``: everything read from one file (None: no bound; a regular
    file ends, but one that keeps growing would not).  Parquet is read by
    pyarrow in batches; only ``total_bytes`` (its size on disk) applies.
    """

    record_bytes: int = 64 * MiB
    document_bytes: int = 1024 * MiB
    total_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a data file.

    ``number``: 1-based, in file order (header rows are not records).
    ``line``: 1-based physical line where the record starts (jsonl, text,
    csv, tsv); the 1-based row for parquet; the 1-based element for a JSON
    list (1 for a JSON file that is not a list).  ``value``: the parsed record:
    any JSON value (jsonl, json); ``{column: cell}`` (csv, tsv; cells past
    the header keyed by their 0-based column index); ``{column: value}``
    (parquet, as ``pyarrow`` gives it); the line without its line end (text).
    """

    number: int
    line: int
    value: Any

    def text_fields(self) -> list[tuple[FieldPath, str]]:
        """The record's string leaves with their key paths (see ``text_fields``)."""
        return list(text_fields(self.value))


def text_fields(value: Any) -> Iterator[tuple[FieldPath, str]]:
    """Every string leaf under ``value``, in document order, with its key path.

    Dict values and list or tuple items are walked; dict keys, numbers,
    booleans, None and bytes are not text fields.  A string ``value`` itself
    is one field with the empty path.
    """
    stack: list[tuple[FieldPath, Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            yield path, node
        elif isinstance(node, dict):
            stack.extend((path + (k,), v) for k, v in reversed(node.items()))
        elif isinstance(node, (list, tuple)):
            stack.extend((path + (i,), v) for i, v in reversed(list(enumerate(node))))


# --- errors ---------------------------------------------------------------------


class RecordReadError(InputError):
    """A data file's records cannot be read: ``path``, ``line`` and ``observed`` say
    where and what (a FIFO, a device, a folder or an unreadable file land here)."""

    reason = "unreadable-records"


class MalformedRecordError(RecordReadError):
    """A record does not parse: bad JSON, a duplicate key, nesting too deep for
    the JSON parser, a CSV header that names a column twice."""

    reason = "malformed-record"


class RecordEncodingError(MalformedRecordError):
    """A record is not valid UTF-8."""

    reason = "not-utf8"


class RecordTooLargeError(RecordReadError):
    """A record, a JSON document or the file as a whole is over its ``Limits``."""

    reason = "too-large"


class UnsupportedFormatError(RecordReadError):
    """No reader for this format (or Parquet without pyarrow)."""

    reason = "unsupported-format"


_HINTS = {
    RecordReadError: "give a regular, readable data file",
    MalformedRecordError: "fix the record, or the file's declared format",
    RecordEncodingError: "re-encode the file as UTF-8",
    RecordTooLargeError: "split the file or the record, or raise the limit",
    UnsupportedFormatError: "declare one of jsonl, ndjson, json, csv, tsv, parquet, text, txt",
}


def fail(
    kind: type[RecordReadError],
    path: Path,
    what: str,
    *,
    line: int | None = None,
    column: int | None = None,
) -> RecordReadError:
    """A ``kind`` error naming the path, the line (when known) and what is wrong."""
    where = f"{path}:{line}" if line is not None else str(path)
    return kind(
        f"cannot read records in {where}: {what}",
        path=str(path),
        line=line,
        column=column,
        observed=what,
        hint=_HINTS[kind],
    )


class DuplicateKey(ValueError):
    """Raised by ``loads`` at a repeated object key (turned into an error with a line)."""


_PAIRS = unique_keys(lambda key: DuplicateKey(f"duplicate key {key!r}"))
_DECODER = json.JSONDecoder(object_pairs_hook=_PAIRS)  # ``json.loads`` builds one a call


def loads(text: str, path: Path, line: int) -> Any:
    """One JSON value, refusing duplicate keys; errors name ``path`` and ``line``.

    ``line`` is the physical line ``text`` starts on; a JSON syntax error is
    reported on the line it is found on.  NaN and Infinity are read, as
    ``json`` (and so the record count) reads them.
    """
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        at = line + exc.lineno - 1
        raise fail(MalformedRecordError, path, exc.msg, line=at, column=exc.colno) from None
    except DuplicateKey as exc:
        raise fail(MalformedRecordError, path, str(exc), line=line) from None
    except RecursionError:
        why = "JSON nested too deeply for the parser"
        raise fail(MalformedRecordError, path, why, line=line) from None
