"""Small files read once: format, digest and findings from the bytes of one read.

Layer: judging rooms - edge of the scanner (reads files).  A folder of a million
one-line shards cost three opens and five stats a file (the sniff, the scan, the cache's
hash and its stat checks).  ``read_small`` opens each file once (``O_NONBLOCK``: a FIFO
swapped in cannot hang it; a descriptor ``held`` kept for verify is read instead),
checks with ``fstat`` that it is a regular file of at most ``SMALL`` bytes, reads it
whole and takes ``fstat`` again; a file that changed while it was read is not judged
here.  The format is told from those bytes (``sniff.format_of``) and a text file is
scanned from them (``readers.scan_text_open``), so its findings, its digest and its stat
key all describe the same bytes.  Everything else (large, not text, unopenable, changed
while read) is left to the engine's usual path, which judges it as it always did,
unreadable rows included.

On Linux with two CPUs or more, a long list is read by forked workers (after the
matcher is compiled, so they share it) in chunks, in order; inside a pool's own
worker (which may not start processes) it is read in that process.
"""

from __future__ import annotations

import hashlib
import io
import multiprocessing
import os
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ftmanifest import held
from ftmanifest.findings import Finding
from ftmanifest.progress import ProgressSink
from ftmanifest.scan.artifacts.sniff import format_of
from ftmanifest.scan.text.matcher import matcher
from ftmanifest.scan.text.readers import scan_text_open
from ftmanifest.statcache import StatKey

if TYPE_CHECKING:
    from ftmanifest.scan.engine import ScanOptions

SMALL = 256 << 10  # most bytes of a file read whole here
FORK_MIN = 4096  # fewest files worth forking workers for (~0.1 s)
PIECE = 1024  # files per worker task
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class Small(NamedTuple):
    """One file judged here: findings, size, and what was read."""

    at: int  # the file's place in the list read
    findings: list[Finding]
    size: int
    digest: str | None  # ``sha256:<hex>`` of the bytes scanned, when asked for
    key: StatKey  # the descriptor's stat, the same before and after the read
    read_at: int  # wall clock before the read (the stat cache's racy test)
    cached: bool  # the findings are the scan cache's for that digest, not scanned again


# The scan cache's (scanned bytes, findings) for a digest under a file's name, or None.
Served = Callable[[str, Path], "tuple[int, list[Finding]] | None"]


def read_small(
    paths: Sequence[Path], opts: ScanOptions, *, jobs: int, digests: bool = False,
    served: Served | None = None, progress: ProgressSink | None = None,
) -> tuple[list[Small], list[int]]:  # fmt: skip
    """(the files judged here, in order; the indices of the others, in order).

    ``digests``: each file's digest too.  ``served``: asked with each text file's
    digest before it is scanned (called in the worker that read it, so it must open
    what it needs there).  ``progress`` counts the files judged here and their
    bytes, a chunk of ``PIECE`` files at a time."""
    names = [os.fspath(p) for p in paths]
    if opts.ner:
        return [], list(range(len(names)))  # text gets a no-backend row: the usual path
    pieces = [(start, names[start : start + PIECE]) for start in range(0, len(names), PIECE)]
    if _forks(len(names), jobs):
        matcher(opts.secrets, opts.pii, opts.engine)  # compiled once, inherited by workers
        kept = held.current()
        inherit = kept.descriptors() if kept is not None else {}
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(min(jobs, len(pieces)), held.adopt, (inherit,)) as pool:
            work = [(s, n, opts, digests, served) for s, n in pieces]
            outs = [_counted(out, progress) for out in pool.imap(_piece_of, work, chunksize=1)]
    else:
        outs = [_counted(_piece(s, n, opts, digests, served), progress) for s, n in pieces]
    done: list[Small] = []
    rest: list[int] = []
    for got, left in outs:
        done += got
        rest += left
    return done, rest


def _counted(
    out: tuple[list[Small], list[int]], progress: ProgressSink | None
) -> tuple[list[Small], list[int]]:
    if progress is not None and out[0]:
        progress.advance(sum(one.size for one in out[0]), items=len(out[0]))
    return out


def _piece_of(
    work: tuple[int, list[str], ScanOptions, bool, Served | None],
) -> tuple[list[Small], list[int]]:
    return _piece(*work)


def _forks(n: int, jobs: int) -> bool:
    return (
        jobs > 1
        and n >= FORK_MIN
        and sys.platform == "linux"
        and not multiprocessing.current_process().daemon
    )


def _piece(
    start: int, names: list[str], opts: ScanOptions, digests: bool, served: Served | None
) -> tuple[list[Small], list[int]]:
    done: list[Small] = []
    rest: list[int] = []
    for i, name in enumerate(names, start):
        one = _one(i, name, opts, digests or served is not None, served)
        if one is None:
            rest.append(i)
        else:
            done.append(one)
    return done, rest


def _one(
    at: int, name: str, opts: ScanOptions, digests: bool, served: Served | None
) -> Small | None:
    fd = held.kept(name)
    own = fd is None
    try:
        if fd is None:
            fd = os.open(name, _FLAGS)
    except OSError:
        return None  # the usual path names why
    try:
        read_at = time.time_ns()
        data, key = _read_whole(fd, opts.max_bytes)
    except OSError:
        return None
    finally:
        if own:
            os.close(fd)
    if data is None or key is None:
        return None
    path = Path(name)
    size = len(data)
    if size and format_of(io.BytesIO(data), path) != "text":
        return None
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}" if digests else None
    hit = served(digest, path) if served is not None and digest is not None else None
    if hit is not None:
        return Small(at, hit[1], hit[0], digest, key, read_at, True)
    found: list[Finding] = []
    if size:
        found, _ = scan_text_open(
            io.BytesIO(data), path, 0, size, size,
            secrets=opts.secrets, pii=opts.pii, engine=opts.engine,
        )  # fmt: skip
    return Small(at, found, size, digest, key, read_at, False)


def _read_whole(fd: int, cap: int) -> tuple[bytes | None, StatKey | None]:
    """A regular file's bytes and stat key, or ``(None, None)``: not regular, over
    ``SMALL`` or ``cap``, or changed while read."""
    before = os.fstat(fd)
    if not stat.S_ISREG(before.st_mode) or before.st_size > min(SMALL, cap):
        return None, None
    want = before.st_size + 1  # one byte more: a file that grew is seen to
    parts: list[bytes] = []
    got = 0
    while got < want:
        block = os.pread(fd, want - got, got)
        if not block:
            break
        parts.append(block)
        got += len(block)
    data = b"".join(parts)
    key = StatKey.of(before)
    if len(data) != before.st_size or StatKey.of(os.fstat(fd)) != key:
        return None, None
    return data, key
