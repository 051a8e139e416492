"""Line-based records: JSONL, text and CSV/TSV, streamed line by line.

Layer: file access - edge (reads an open file).  Lines are read with a bound
(``Limits.record_bytes``) so one endless line cannot fill memory, and the
bytes read so far are checked against ``Limits.total_bytes``.  What a record
is follows ``ftmanifest.counts`` exactly: for jsonl and text, a line ending
at ``\\n`` that is not blank (``bytes.strip()``); for csv and tsv, each row
``csv.reader`` yields minus the header, read from lines split as a file
opened with ``newline=""`` splits them (at ``\\n``, ``\\r\\n`` or a lone ``\\r``).
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ftmanifest.recordio._types import (
    Limits,
    MalformedRecordError,
    Record,
    RecordEncodingError,
    RecordTooLargeError,
    fail,
    loads,
)

_BOM = b"\xef\xbb\xbf"
_PIECE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")  # one line as newline="" splits


def physical_lines(f: BinaryIO, path: Path, limits: Limits) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line with its ``\\n``) for each ``\\n``-ended line.

    Refuses a line over ``limits.record_bytes`` (its ``\\n`` aside) and a
    file over ``limits.total_bytes`` before holding more than either in memory.
    """
    cap, total, number = limits.record_bytes, 0, 0
    while raw := f.readline(cap + 1):
        number += 1
        total += len(raw)
        if limits.total_bytes is not None and total > limits.total_bytes:
            what = f"file longer than the {limits.total_bytes}-byte limit"
            raise fail(RecordTooLargeError, path, what, line=number)
        if len(raw) > cap and not (len(raw) == cap + 1 and raw.endswith(b"\n")):
            what = f"line longer than the {cap}-byte record limit"
            raise fail(RecordTooLargeError, path, what, line=number)
        yield number, raw


def line_blocks(
    f: BinaryIO, path: Path, limits: Limits, size: int = 1 << 20
) -> Iterator[tuple[int, list[bytes]]]:
    """``physical_lines`` a block at a time: (number of the block's first line, its
    lines), read ``size`` bytes at once and split in C rather than a ``readline`` per
    line.  The same lines, numbers and refusals: a block holding a line over a limit
    yields the lines before it, then raises as ``physical_lines`` does at that line."""
    cap, limit = limits.record_bytes, limits.total_bytes
    total, number = 0, 0
    pending: list[bytes] = []  # the start of a line that no block has ended yet
    held = 0
    while True:
        data = f.read(size)
        if not data:
            if not pending:
                return
            lines, pending, held = [b"".join(pending)], [], 0
        else:
            end = data.rfind(b"\n") + 1
            if end == 0:
                pending.append(data)
                held += len(data)
                if held <= cap:
                    continue
                lines, pending, held = [b"".join(pending)], [], 0  # refused below
            else:
                lines = io.BytesIO(data[:end]).readlines()
                if pending:
                    lines[0] = b"".join(pending) + lines[0]
                pending = [data[end:]] if end < len(data) else []
                held = len(data) - end
        longest = max(map(len, lines))
        grown = total + sum(map(len, lines))
        last = lines[-1]  # the only line that may lack its \n: the file's last
        over = longest > cap + 1 or (len(last) > cap and not last.endswith(b"\n"))
        if over or (limit is not None and grown > limit):
            yield from _checked(lines, number, total, path, limits)  # raises at the line
        yield number + 1, lines
        number += len(lines)
        total = grown


def _checked(
    lines: list[bytes], number: int, total: int, path: Path, limits: Limits
) -> Iterator[tuple[int, list[bytes]]]:
    """The lines before the first that ``physical_lines`` refuses, then its refusal (it
    reads at most ``record_bytes + 1`` bytes of a line before judging it)."""
    cap = limits.record_bytes
    for k, line in enumerate(lines):
        raw = line[: cap + 1]
        total += len(raw)
        what = ""
        if limits.total_bytes is not None and total > limits.total_bytes:
            what = f"file longer than the {limits.total_bytes}-byte limit"
        elif len(raw) > cap and not (len(raw) == cap + 1 and raw.endswith(b"\n")):
            what = f"line longer than the {cap}-byte record limit"
        if what:
            if k:
                yield number + 1, lines[:k]
            raise fail(RecordTooLargeError, path, what, line=number + k + 1)
    raise AssertionError("a block over a limit holds no line over it")  # pragma: no cover


def decode_line(raw: bytes, path: Path, line: int) -> str:
    """One physical line as text: UTF-8, a BOM dropped from line 1 (``RecordEncodingError``
    naming the line and byte otherwise)."""
    if line == 1 and raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        what = f"not UTF-8 ({exc.reason} at byte {exc.start + 1} of the line)"
        raise fail(RecordEncodingError, path, what, line=line, column=exc.start + 1) from None


def jsonl_records(f: BinaryIO, path: Path, limits: Limits) -> Iterator[Record]:
    """One JSON value per non-blank line."""
    number = 0
    for line, raw in physical_lines(f, path, limits):
        if raw.strip():
            number += 1
            yield Record(number, line, loads(decode_line(raw, path, line), path, line))


def text_records(f: BinaryIO, path: Path, limits: Limits) -> Iterator[Record]:
    """One string per non-blank line, without its ``\\n`` or ``\\r\\n``."""
    number = 0
    for line, raw in physical_lines(f, path, limits):
        if raw.strip():
            number += 1
            text = decode_line(raw, path, line)
            text = text[:-1] if text.endswith("\n") else text
            yield Record(number, line, text[:-1] if text.endswith("\r") else text)


class _Row:
    """Where the row being read starts (its line and its byte offset in the file)
    and how many bytes it has taken so far; the reader marks it ``fresh`` after
    each row (``csv.reader`` reads no line past the end of the row it returns)."""

    def __init__(self) -> None:
        self.fresh, self.start, self.used, self.offset = True, 0, 0, 0


def _csv_lines(f: BinaryIO, path: Path, limits: Limits, row: _Row) -> Iterator[str]:
    """Decoded lines as a file opened with ``newline=""`` yields them."""
    at = 0  # the byte offset of the physical line
    for line, raw in physical_lines(f, path, limits):
        text = decode_line(raw, path, line)
        pos = at + len(raw) - len(text.encode()) if line == 1 else at  # after a BOM
        at += len(raw)
        for piece in _PIECE.findall(text) if "\r" in text else (text,):
            if row.fresh:
                row.fresh, row.start, row.used, row.offset = False, line, 0, pos
            if "\r" in text:  # a lone CR can start a row inside the physical line
                pos += len(piece.encode())
            row.used += len(piece)
            if row.used > limits.record_bytes:
                what = f"row longer than the {limits.record_bytes}-byte record limit"
                raise fail(RecordTooLargeError, path, what, line=row.start)
            yield piece


def delimited_records(f: BinaryIO, path: Path, limits: Limits, delimiter: str) -> Iterator[Record]:
    """``csv.reader`` rows (default dialect) as ``{header cell: cell}``, header skipped
    (``delimited_rows``, without the offsets)."""
    return (rec for rec, _offset in delimited_rows(f, path, limits, delimiter))


def delimited_rows(
    f: BinaryIO, path: Path, limits: Limits, delimiter: str
) -> Iterator[tuple[Record, int]]:
    """``csv.reader`` rows as records, each with the byte offset its row starts at.

    Cells past the header are keyed by their 0-based column index; a short row
    has only its own cells.  A header that names a column twice is refused (a
    dict would keep one of the two).  ``csv.field_size_limit`` is raised to
    ``record_bytes`` when lower, so a long field is read as ``records`` counts it.
    """
    if csv.field_size_limit() < limits.record_bytes:
        csv.field_size_limit(limits.record_bytes)  # process-wide, and only ever raised
    row = _Row()
    reader = csv.reader(_csv_lines(f, path, limits, row), delimiter=delimiter)
    header: list[str] | None = None
    number = 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise fail(MalformedRecordError, path, str(exc), line=row.start) from None
        row.fresh = True
        if header is None:
            header = cells
            twice = sorted(c for c, n in Counter(cells).items() if n > 1)
            if twice:
                what = f"header names column {twice[0]!r} more than once"
                raise fail(MalformedRecordError, path, what, line=row.start)
            continue
        number += 1
        value: dict[str | int, str] = {}
        for i, cell in enumerate(cells):
            value[header[i] if i < len(header) else i] = cell
        yield Record(number, row.start, value), row.offset
