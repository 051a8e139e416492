"""A split cut into chunks of records at line boundaries, the unit the signing pool
hands its workers.

Layer: judging rooms - data (edge: reads the split).  What flows through here is the
split's bytes: JSONL and text files are cut by the parent at line boundaries into
``_Lines`` of about ``CHUNK_BYTES`` (``line_blocks``, with the reader's per-line
bound), decoded and parsed later in a worker exactly as ``recordio`` does, line numbers
included (``_texts``); CSV/TSV (a quoted cell may span lines), JSON and Parquet are read
by ``recordio.iter_records`` here and only their task text is handed on (``_Texts``).  A
folder of shards is cut the same way, shard by shard, small shards batched into one job
(``_Batch``), so every rank of a torchrun job cuts a split into the same chunks.
``selected_texts`` reads back only the records a verdict names, counting the lines it
skips instead of parsing them.  Signing the chunks is ``parallel``'s; gathering them
across ranks is ``ranks``'.
"""

from __future__ import annotations

import io
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

from ftmanifest.counts import format_of, open_regular
from ftmanifest.data.shards import Marks, shard_path
from ftmanifest.data.text import task_text
from ftmanifest.recordio import (
    DEFAULT_LIMITS,
    RecordReadError,
    decode_line,
    fail,
    iter_records,
    line_blocks,
    loads,
)

CHUNK_BYTES = 1 << 20
CHUNK_RECORDS = 4096
BLOCK_BYTES = 1 << 20  # read at once, then split into lines
LINE_KINDS = frozenset({"jsonl", "ndjson", "text", "txt"})


@dataclass(frozen=True)
class _Lines:
    """JSONL or text lines from ``first`` on, as read (with their line ends)."""

    path: str
    kind: str
    fields: tuple[str, ...]
    first: int
    raws: list[bytes]


@dataclass(frozen=True)
class _Texts:
    """Records already read by the parent: (number, line, text)."""

    items: list[tuple[int, int, str]]


@dataclass(frozen=True)
class _Batch:
    """The chunks of several small shards, signed as one job (a folder of a million
    one-line shards is a thousand jobs, not a million)."""

    jobs: tuple[_Lines | _Texts, ...]


Job = _Lines | _Texts | _Batch


def _texts(job: _Lines) -> list[tuple[int, str]]:
    """(line, text) of each non-blank line, decoded and parsed as ``recordio`` does."""
    path = Path(job.path)
    out = []
    for i, raw in enumerate(job.raws):
        if not raw.strip():
            continue
        line = job.first + i
        text = decode_line(raw, path, line)
        if job.kind in ("jsonl", "ndjson"):
            out.append((line, task_text(loads(text, path, line), job.fields)))
        else:
            text = text[:-1] if text.endswith("\n") else text
            out.append((line, text[:-1] if text.endswith("\r") else text))
    return out


def _blocks(path: Path) -> Iterator[tuple[int, list[bytes]]]:
    """(number of the first line, lines) of ``path`` a block at a time, with the reader's
    bounds and its errors."""

    def refuse(p: Path, reason: str) -> RecordReadError:
        return fail(RecordReadError, p, reason)

    with open_regular(path, refuse) as raw, io.BufferedReader(raw, 1 << 20) as f:
        try:
            yield from line_blocks(f, path, DEFAULT_LIMITS, BLOCK_BYTES)
        except OSError as exc:
            if isinstance(exc, RecordReadError):
                raise
            raise fail(RecordReadError, path, exc.strerror or str(exc)) from exc


def _line_chunks(path: Path, kind: str, fields: tuple[str, ...]) -> Iterator[_Lines]:
    """Chunks of about ``CHUNK_BYTES`` at line boundaries: a chunk ends before the line
    that finds it ``CHUNK_BYTES`` long or ``CHUNK_RECORDS`` lines long.  Each line keeps
    its number in the file, so a byte-order mark is stripped on line 1 only, as the
    reader does."""
    raws: list[bytes] = []
    first, size = 1, 0
    for start, block in _blocks(path):
        at = 0
        while at < len(block):
            if size >= CHUNK_BYTES or len(raws) >= CHUNK_RECORDS:
                yield _Lines(str(path), kind, fields, first, raws)
                raws, first, size = [], start + at, 0
            part = block[at : at + CHUNK_RECORDS - len(raws)]
            before = list(accumulate(map(len, part), initial=size))  # the size before each
            take = min(bisect_left(before, CHUNK_BYTES), len(part))  # those while it is short
            raws += part[:take]
            size = before[take]
            at += take
    if raws:
        yield _Lines(str(path), kind, fields, first, raws)


def shard_chunks(
    folder: Path,
    fmt: str | None,
    fields: tuple[str, ...],
    shards: Sequence[str],
    marks: Marks | None = None,
) -> Iterator[Job]:
    """The chunks of every shard, in order, small ones batched to about a chunk's size;
    each shard's first record number noted in ``marks`` before its chunks are yielded.
    Every rank cuts a folder into the same jobs."""
    batch: list[_Lines | _Texts] = []
    size = records = count = 0
    for name in shards:
        path = shard_path(folder, name)
        if marks is not None:
            marks.note(records + 1, name)
        kind = format_of(path, fmt)
        lines = kind in LINE_KINDS
        chunks = _line_chunks(path, kind, fields) if lines else _text_chunks(path, fmt, fields)
        for job in chunks:
            if isinstance(job, _Lines):
                records += sum(map(bool, map(bytes.strip, job.raws)))  # as ``_texts`` skips
                size += sum(map(len, job.raws))
                count += len(job.raws)
            else:
                records += len(job.items)
                size += sum(len(t) for _n, _l, t in job.items)
                count += len(job.items)
            batch.append(job)
            if size >= CHUNK_BYTES or count >= CHUNK_RECORDS:
                yield batch[0] if len(batch) == 1 else _Batch(tuple(batch))
                batch, size, count = [], 0, 0
    if batch:
        yield batch[0] if len(batch) == 1 else _Batch(tuple(batch))


def _text_chunks(path: Path, fmt: str | None, fields: tuple[str, ...]) -> Iterator[_Texts]:
    items: list[tuple[int, int, str]] = []
    size = 0
    for rec in iter_records(path, fmt):
        text = task_text(rec.value, fields)
        items.append((rec.number, rec.line, text))
        size += len(text)
        if size >= CHUNK_BYTES or len(items) >= CHUNK_RECORDS:
            yield _Texts(items)
            items, size = [], 0
    if items:
        yield _Texts(items)


def selected_texts(
    path: Path,
    fmt: str | None,
    fields: Sequence[str],
    wanted: set[int],
    marks: Marks | None = None,
) -> Iterator[tuple[int, int, str]]:
    """(number, line, text) of the records numbered in ``wanted``, in file order; JSONL
    and text lines that are not wanted are counted, not parsed.  A folder of shards
    (``marks``, as its first reading noted them) reads only the shards that hold one."""
    if marks is None or not marks.firsts:
        yield from _selected(path, fmt, fields, wanted)
        return
    ends = [*marks.firsts[1:], None]
    for first, end, name in zip(marks.firsts, ends, marks.names, strict=True):
        here = {n - first + 1 for n in wanted if n >= first and (end is None or n < end)}
        if here:
            for n, line, text in _selected(shard_path(path, name), fmt, fields, here):
                yield n + first - 1, line, text


def _selected(
    path: Path, fmt: str | None, fields: Sequence[str], wanted: set[int]
) -> Iterator[tuple[int, int, str]]:
    kind = format_of(path, fmt)
    if kind not in LINE_KINDS:
        for rec in iter_records(path, fmt):
            if rec.number in wanted:
                yield rec.number, rec.line, task_text(rec.value, fields)
        return
    fields = tuple(fields)
    ahead = sorted(wanted, reverse=True)  # the wanted numbers not reached yet, last first
    number = 0
    for start, block in _blocks(path):
        if not ahead:
            return
        records = sum(map(bool, map(bytes.strip, block)))  # non-blank lines: records
        if ahead[-1] > number + records:
            number += records  # none wanted here: counted, not parsed
            continue
        raws = [b""] * len(block)  # blank: skipped, keeps the line numbers
        keep = []
        for i, raw in enumerate(block):
            if raw.strip():
                number += 1
                if number in wanted:
                    keep.append(number)
                    raws[i] = raw
        while ahead and ahead[-1] <= number:
            ahead.pop()
        texts = _texts(_Lines(str(path), kind, fields, start, raws))
        for n, (line, text) in zip(keep, texts, strict=True):
            yield n, line, text
