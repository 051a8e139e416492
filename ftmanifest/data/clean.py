"""``--write-clean``: a training file without its leaking records, byte for byte otherwise.

Layer: data (edge: reads the input, writes the output atomically).  The
original lines are copied, never re-serialised: a JSONL or text record is its
one line; a CSV/TSV record runs from the line its row starts on to the line
before the next row (a quoted cell may span lines).  The input is never
written; an output that is the input itself is refused.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from ftmanifest.errors import InputError, UsageError
from ftmanifest.recordio import iter_records
from ftmanifest.records import format_of

LINE_FORMATS = frozenset({"jsonl", "ndjson", "text", "txt"})
ROW_FORMATS = frozenset({"csv", "tsv"})


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def dropped_lines(path: Path, fmt: str | None, drop: Collection[int]) -> set[int]:
    """The 1-based physical lines that make up the records numbered in ``drop``."""
    kind = format_of(path, fmt)
    if kind not in LINE_FORMATS | ROW_FORMATS:
        raise InputError(
            f"cannot write a clean copy of {path}: format {kind!r} is not line-based",
            path=str(path),
            field="format",
            expected="jsonl, ndjson, text, txt, csv or tsv",
            observed=kind,
            hint="convert the training split to JSONL, or clean it with your own tooling",
        )
    out: set[int] = set()
    pending: int | None = None  # start line of a dropped row whose end is not known yet
    for rec in iter_records(path, fmt):
        if pending is not None:
            out.update(range(pending, rec.line))
            pending = None
        if rec.number in drop:
            if kind in LINE_FORMATS:
                out.add(rec.line)
            else:
                pending = rec.line
    if pending is not None:
        out.add(-pending)  # to the end of the file
    return out


def write_clean(path: Path, fmt: str | None, drop: Collection[int], out: Path) -> str:
    """Write ``path`` less the records in ``drop`` to ``out``; return its ``sha256:`` digest."""
    from ftmanifest.fsutil import atomic_write_bytes
    from ftmanifest.hashing import hash_file

    refuse_input(path, out)
    lines = dropped_lines(path, fmt, drop)
    tail = min((-n for n in lines if n < 0), default=None)
    kept = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if number in lines or (tail is not None and number >= tail):
                continue
            kept.append(raw)
    atomic_write_bytes(out, b"".join(kept))
    return hash_file(out, use_cache=False).digest


def refuse_input(path: Path, out: Path) -> None:
    """Refuse an output that is the input itself (checked before the long search, and again)."""
    if _same_file(path, out):
        raise UsageError(
            f"--write-clean {out} is the training file itself",
            path=str(out),
            field="--write-clean",
            expected="a new path (the input is never modified)",
            observed=str(path),
            hint="write the clean copy elsewhere, then point the manifest's data entry at it",
        )
