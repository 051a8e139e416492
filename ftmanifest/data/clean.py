"""``--write-clean``: a training file without its leaking records, byte for byte otherwise.

Layer: data (edge: reads the input, writes the output atomically).  The
original lines are copied, never re-serialised: a JSONL or text record is its
one line; a CSV/TSV record runs from the line its row starts on to the line
before the next row (a quoted cell may span lines).  The input is never
written; an output that is the input itself is refused.

The copy is streamed (memory does not grow with the file) to a temp file
beside the output, fsynced and renamed over it, with the input's permission
bits (less any execute bit): the copy holds the same data, so it is readable by
exactly whom the input is.  The input's ``fingerprint`` (stat and sha256),
taken before the leakage check, must still hold for the bytes copied and
after the copy; a training file that changed meanwhile is refused (exit 2),
since the records dropped were found in another file.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from ftmanifest.counts import format_of
from ftmanifest.errors import InputError, UsageError
from ftmanifest.recordio import iter_records

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


@dataclass(frozen=True)
class Fingerprint:
    """What identifies the input's contents: its stat and its sha256."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    digest: str

    def same_stat(self, st: os.stat_result) -> bool:
        now = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return now == (self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns)


READ = 1 << 20


def fingerprint(path: Path) -> Fingerprint:
    """Stat and sha256 of ``path`` (read in full, no cache)."""
    from ftmanifest.counts import open_regular

    def refuse(p: Path, reason: str) -> InputError:
        return InputError(f"cannot read {p}: {reason}", path=str(p), observed=reason,
                          hint="point the training entry at a regular file")  # fmt: skip

    h = hashlib.sha256()
    with open_regular(path, refuse) as f:
        st = os.fstat(f.fileno())
        while chunk := f.read(READ):
            h.update(chunk)
    return Fingerprint(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                       "sha256:" + h.hexdigest())  # fmt: skip


def _changed(path: Path, why: str) -> InputError:
    return InputError(
        f"{path} changed while it was checked: {why}",
        path=str(path),
        field="--write-clean",
        expected="the training file as it was when the leakage check read it",
        observed=why,
        hint="run data check --write-clean again once nothing writes the training file",
    )


def write_clean(
    path: Path,
    fmt: str | None,
    drop: Collection[int],
    out: Path,
    expect: Fingerprint | None = None,
) -> str:
    """Stream ``path`` less the records in ``drop`` to ``out``; return its ``sha256:`` digest.

    ``expect``: the input as the check read it; a difference refuses the copy and
    leaves ``out`` as it was.  Without it, the input is fingerprinted first."""
    from ftmanifest.counts import format_of
    from ftmanifest.fsutil import fsync_dir, write_error

    refuse_input(path, out)
    expect = expect or fingerprint(path)
    kind = format_of(path, fmt)
    lines = set() if kind in LINE_FORMATS else dropped_lines(path, fmt, drop)
    tail = min((-n for n in lines if n < 0), default=None)
    folder = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise write_error(IsADirectoryError(21, "is a directory"), out)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise write_error(exc, out) from None
    try:
        seen, written = hashlib.sha256(), hashlib.sha256()
        with open(path, "rb") as src, os.fdopen(fd, "wb") as dst:
            os.fchmod(dst.fileno(), stat.S_IMODE(os.fstat(src.fileno()).st_mode) & 0o666)
            number = 0  # records so far (line formats: non-blank lines)
            for line, raw in enumerate(src, start=1):
                seen.update(raw)
                if kind in LINE_FORMATS:
                    if raw.strip():
                        number += 1
                        if number in drop:
                            continue
                elif line in lines or (tail is not None and line >= tail):
                    continue
                written.update(raw)
                dst.write(raw)
            after = os.fstat(src.fileno())
            if "sha256:" + seen.hexdigest() != expect.digest:
                raise _changed(path, "its contents differ from those checked")
            if not (expect.same_stat(after) and expect.same_stat(os.stat(path))):
                raise _changed(path, "its size, times or inode differ from those checked")
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, out)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, InputError):
            raise write_error(exc, out) from None
        raise
    fsync_dir(folder)
    return "sha256:" + written.hexdigest()


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
