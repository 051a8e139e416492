"""Whole-file records: a JSON document, a Parquet table.

Layer: file access - edge (reads an open file; pyarrow is imported only here, inside a
function).  A JSON file is parsed at once (bounded by ``Limits.document_bytes``):
a top-level list is one record per element, anything else one record.  A
Parquet file is read in batches of ``BATCH`` rows, each row a dict, its
columns as ``pyarrow`` converts them to Python.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ftmanifest.recordio._types import (
    Limits,
    MalformedRecordError,
    Record,
    RecordEncodingError,
    RecordReadError,
    RecordTooLargeError,
    UnsupportedFormatError,
    fail,
    loads,
)

BATCH = 1024  # parquet rows converted to Python at once


def _check_size(f: BinaryIO, path: Path, cap: int | None, what: str) -> None:
    size = os.fstat(f.fileno()).st_size
    if cap is not None and size > cap:
        raise fail(RecordTooLargeError, path, f"{what} is {size} bytes, over the {cap}-byte limit")


def json_records(f: BinaryIO, path: Path, limits: Limits) -> Iterator[Record]:
    """A top-level list: its elements (``line`` = element number); else the value."""
    cap = limits.document_bytes
    if limits.total_bytes is not None:
        cap = min(cap, limits.total_bytes)
    _check_size(f, path, cap, "the JSON document")
    data = f.read(cap + 1)
    if len(data) > cap:  # grew since fstat
        raise fail(RecordTooLargeError, path, f"the JSON document is over the {cap}-byte limit")
    encoding = json.detect_encoding(data)  # UTF-8 (with or without BOM), UTF-16 or UTF-32
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        what = f"not {encoding.upper()} ({exc.reason} at byte {exc.start + 1})"
        raise fail(RecordEncodingError, path, what, line=line) from None
    del data
    value = loads(text.removeprefix("\ufeff"), path, 1)
    if not isinstance(value, list):
        yield Record(1, 1, value)
        return
    for i, item in enumerate(value, 1):
        yield Record(i, i, item)


def parquet_records(f: BinaryIO, path: Path, limits: Limits) -> Iterator[Record]:
    """Each row as ``{column: value}``; ``line`` is the 1-based row."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        why = "Parquet needs pyarrow (pip install pyarrow)"
        raise fail(UnsupportedFormatError, path, why) from None
    _check_size(f, path, limits.total_bytes, "the Parquet file")
    number = 0
    try:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        twice = sorted(name for name, n in Counter(names).items() if n > 1)
        if twice:
            raise fail(MalformedRecordError, path, f"column {twice[0]!r} appears more than once")
        for batch in pf.iter_batches(batch_size=BATCH):
            for row in batch.to_pylist():
                number += 1
                yield Record(number, number, row)
    except (OSError, pa.ArrowException, ValueError) as exc:
        if isinstance(exc, RecordReadError):
            raise
        what = f"Parquet unreadable after row {number} ({exc})" if number else str(exc)
        raise fail(MalformedRecordError, path, what, line=number + 1 if number else None) from exc
