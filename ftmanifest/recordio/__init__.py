"""One record reader for data files: JSONL, JSON, CSV/TSV, Parquet and text.

Layer: file access (reads files).  ``iter_records(path, fmt)`` yields each record
with its number, the line (or row, or element) it starts on and its parsed
value; ``Record.text_fields()`` gives its string leaves with their key paths,
for the data checks (split leakage, duplicates, per-category statistics) and
preflight to hash and scan.

A record is exactly what ``ftmanifest.counts`` counts (its docstring is the
definition, ``records.format_of`` picks the format): for every file both
accept, ``records.count_file(path, fmt)`` equals the number of records
yielded.  Reading fails closed with a ``RecordReadError`` (an ``InputError``,
exit 2) naming the path, the line and what is wrong: a record that does not
parse, a duplicate JSON key, invalid UTF-8, JSON nested too deeply, a record
or file over its ``Limits``, a format with no reader.  Anything but a regular
file (a FIFO, a device) is refused before a byte is read
(``records.open_regular``).
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

from ftmanifest.counts import DELIMITERS, LINE_FORMATS, format_of, open_regular
from ftmanifest.recordio._lines import (
    decode_line,
    delimited_records,
    delimited_rows,
    jsonl_records,
    line_blocks,
    physical_lines,
    text_records,
)
from ftmanifest.recordio._types import (
    FieldPath,
    Limits,
    MalformedRecordError,
    Record,
    RecordEncodingError,
    RecordReadError,
    RecordTooLargeError,
    UnsupportedFormatError,
    fail,
    loads,
    text_fields,
)
from ftmanifest.recordio._whole import json_records, parquet_records

__all__ = [
    "DEFAULT_LIMITS",
    "FORMATS",
    "FieldPath",
    "Limits",
    "MalformedRecordError",
    "Record",
    "RecordEncodingError",
    "RecordReadError",
    "RecordTooLargeError",
    "UnsupportedFormatError",
    "decode_line",
    "fail",
    "iter_records",
    "iter_rows",
    "loads",
    "line_blocks",
    "physical_lines",
    "text_fields",
]

_T = TypeVar("_T")
_Reader = Callable[[BinaryIO, Path, Limits], Iterator[Record]]
_READERS: dict[str, _Reader] = {
    **{kind: jsonl_records for kind in LINE_FORMATS if kind in ("jsonl", "ndjson")},
    **{kind: text_records for kind in LINE_FORMATS if kind in ("text", "txt")},
    **{
        kind: functools.partial(delimited_records, delimiter=delim.decode())
        for kind, delim in DELIMITERS.items()
    },
    "json": json_records,
    "parquet": parquet_records,
}
FORMATS = frozenset(_READERS)
_BUFFER = 1 << 20
DEFAULT_LIMITS = Limits()


def iter_records(
    path: str | os.PathLike[str], fmt: str | None = None, *, limits: Limits = DEFAULT_LIMITS
) -> Iterator[Record]:
    """The records of one data file, in order; ``fmt`` as ``records.format_of``.

    The file is opened (and a non-regular one refused) on the first ``next``,
    and closed when the iterator is exhausted or closed.
    """
    p = Path(path)
    kind = format_of(p, fmt)
    reader = _READERS.get(kind)
    if reader is None:
        raise fail(UnsupportedFormatError, p, f"no record reader for format {kind!r}")
    return _read(p, reader, limits)


def iter_rows(
    path: str | os.PathLike[str], fmt: str | None = None, *, limits: Limits = DEFAULT_LIMITS
) -> Iterator[tuple[Record, int]]:
    """A CSV or TSV file's records as ``iter_records`` yields them, each with the byte
    offset its row starts at (a row may start inside a line: after a lone CR)."""
    p = Path(path)
    kind = format_of(p, fmt)
    if kind not in DELIMITERS:
        raise fail(UnsupportedFormatError, p, f"no row reader for format {kind!r}")
    reader = functools.partial(delimited_rows, delimiter=DELIMITERS[kind].decode())
    return _read(p, reader, limits)


def _read(path: Path, reader: Callable[..., Iterator[_T]], limits: Limits) -> Iterator[_T]:
    with open_regular(path, _open_error) as raw, io.BufferedReader(raw, _BUFFER) as f:
        try:
            yield from reader(f, path, limits)
        except OSError as exc:  # EIO and the like, mid-read
            if isinstance(exc, RecordReadError):
                raise
            raise fail(RecordReadError, path, exc.strerror or str(exc)) from exc


def _open_error(path: Path, reason: str) -> RecordReadError:
    return fail(RecordReadError, path, reason)
