"""Reading one regular file into its digest, and its record count when asked.

Layer: file access (reads files).  A job (``_Job``) in, a digest with the stat
it was read under (``_Hashed``) or an error out: one descriptor, one reused
buffer, the stat compared before and after, the hash on a helper thread while
this one counts (``_read_overlapped``), or a second read to count json and
parquet (``_count_after``).
"""

from __future__ import annotations

import hashlib
import io
import os
import queue
import stat
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

from ftmanifest import counts, held
from ftmanifest.counts import Counter, RecordCountError
from ftmanifest.errors import FtManifestError
from ftmanifest.hashing.digests import ALGORITHM, FileDigest, _changed, _not_regular, _os_error
from ftmanifest.progress import ProgressSink
from ftmanifest.statcache import StatCache, StatKey

CHUNK_SIZE = 1 << 20  # 1 MiB: measured as fast as 4 MiB and less memory per worker
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class _Stat(NamedTuple):
    """What hashing needs of a walked entry's stat."""

    st_size: int
    st_mtime_ns: int
    st_ctime_ns: int


class _Job(NamedTuple):
    path: Path  # the key of its result
    abspath: str
    st: os.stat_result | _Stat
    fmt: str | None  # a format that has a count here, or None


class _Hashed(NamedTuple):
    digest: FileDigest
    key: StatKey
    hashed_at: int
    same_read: bool  # records came from the bytes that were hashed


_Outcome: TypeAlias = "_Hashed | FtManifestError"


class _Cancelled(Exception):
    """Workers stop early when the caller was interrupted."""


def _kind(fmt: str | None) -> str:
    kind = counts.cache_key(fmt) if fmt else None
    assert kind is not None, fmt  # _formats keeps countable formats only
    return kind


SMALL_FILE = 256 * 1024  # hashed on the calling thread, not handed to the pool


def _hash_one(
    path: Path,
    fmt: str | None,
    progress: ProgressSink | None,
    cancel: threading.Event,
    overlap: bool,
) -> tuple[_Hashed, int]:
    """Read and digest one file, counting its records when ``fmt`` can stream.

    Returns the digest and the open descriptor, which the caller closes (or
    keeps: ``ftmanifest.held``); on an error the descriptor is closed here.
    """
    hashed_at = time.time_ns()
    counter = counts.counter_for(fmt) if fmt else None
    try:
        fd = os.open(path, _OPEN_FLAGS)  # O_NONBLOCK: a FIFO swapped in cannot hang us
    except OSError as exc:
        raise _os_error(path, exc) from exc
    try:
        return _digest_open(path, fd, counter, progress, cancel, overlap, hashed_at), fd
    except BaseException:
        os.close(fd)
        raise


def _digest_open(
    path: Path,
    fd: int,
    counter: Counter | None,
    progress: ProgressSink | None,
    cancel: threading.Event,
    overlap: bool,
    hashed_at: int,
) -> _Hashed:
    h = hashlib.new(ALGORITHM)
    try:
        with io.FileIO(fd, "rb", closefd=False) as f:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise _not_regular(path, before.st_mode)
            if counter is not None and overlap and before.st_size > CHUNK_SIZE:
                total = _read_overlapped(f, h, counter, progress, cancel)
            else:
                total = _read(f, h, counter, progress, cancel)
            after = os.fstat(fd)
        now = os.stat(path)  # the path may point at a new file (atomic rename)
    except FileNotFoundError as exc:
        raise _changed(path, "the file was removed while it was hashed") from exc
    except OSError as exc:
        raise _os_error(path, exc) from exc
    key = StatKey.of(before)
    if total != before.st_size or StatKey.of(after) != key or StatKey.of(now) != key:
        raise _changed(path, f"size {before.st_size} -> {now.st_size}, read {total} bytes")
    n = counter.result() if counter is not None else None
    return _Hashed(FileDigest(f"{ALGORITHM}:{h.hexdigest()}", total, n), key, hashed_at, True)


_BUFFERS = threading.local()


def _buffer() -> memoryview:
    """This thread's read buffer: allocating 1 MiB a file cost 20 µs a file, the most
    of what hashing a small file costs."""
    view: memoryview | None = getattr(_BUFFERS, "view", None)
    if view is None:
        view = _BUFFERS.view = memoryview(bytearray(CHUNK_SIZE))
    return view


def _read(
    f: io.FileIO,
    h: Any,
    counter: Counter | None,
    progress: ProgressSink | None,
    cancel: threading.Event,
) -> int:
    """Feed every chunk to the hash (and the counter); the number of bytes read."""
    total = 0
    view = _buffer()
    while n := f.readinto(view):
        if cancel.is_set():
            raise _Cancelled
        h.update(view[:n])
        if counter is not None:
            counter.feed(view[:n])
        total += n
        if progress is not None:
            progress.advance(n)
    return total


def _read_overlapped(
    f: io.FileIO,
    h: Any,
    counter: Counter,
    progress: ProgressSink | None,
    cancel: threading.Event,
) -> int:
    """``_read``, with the hash on a helper thread while this one reads ahead and counts.

    hashlib releases the GIL on large updates, so the two run in parallel.
    Two buffers: the next chunk is read into one while the other is hashed.
    """
    views = (memoryview(bytearray(CHUNK_SIZE)), memoryview(bytearray(CHUNK_SIZE)))
    helper = _Hasher(h)
    total, i = 0, 0
    try:
        n = f.readinto(views[0])
        while n:
            if cancel.is_set():
                raise _Cancelled
            chunk = views[i][:n]
            helper.submit(chunk)
            ahead = f.readinto(views[1 - i])
            counter.feed(chunk)
            helper.wait()
            total += n
            if progress is not None:
                progress.advance(n)
            i, n = 1 - i, ahead
    finally:
        helper.close()
    return total


class _Hasher:
    """One helper thread that hashes the chunks it is handed, in order."""

    def __init__(self, h: Any) -> None:
        self._h = h
        self._todo: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name="ftmanifest-hash-helper", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._todo.get()) is not None:
            try:
                self._h.update(chunk)
            except BaseException as exc:  # pragma: no cover - hashlib does not fail on bytes
                self._done.put(exc)
            else:
                self._done.put(None)

    def submit(self, chunk: memoryview) -> None:
        self._todo.put(chunk)

    def wait(self) -> None:
        exc = self._done.get()
        if exc is not None:  # pragma: no cover
            raise exc

    def close(self) -> None:
        """Finish the chunk in hand (its buffer may be reused next) and stop."""
        self._todo.put(None)
        self._thread.join()


def _count_after(job: _Job, hashed: _Hashed, cache: StatCache | None, fd: int) -> _Hashed:
    """Count a json or parquet file: a second read of the descriptor that was hashed,
    trusted only if its stat held still."""
    assert job.fmt is not None
    digest = hashed.digest
    known = cache.lookup_records([(digest.digest, _kind(job.fmt))]) if cache is not None else {}
    n = known.get((digest.digest, _kind(job.fmt)))
    if n is None:
        try:
            n = counts.count_stream(held.reader(fd, str(job.path)), job.path, job.fmt)
        except RecordCountError as exc:
            exc.digest = digest
            raise
        try:
            now = StatKey.of(os.fstat(fd))
        except OSError as exc:
            raise _changed(job.path, "the file could not be read again to count it") from exc
        if now != hashed.key:
            raise _changed(job.path, "the file changed between hashing and counting")
    return hashed._replace(digest=FileDigest(digest.digest, digest.size, n), same_read=False)
