"""Streaming, parallel file and tree digests with a stat cache.

Layer: file access (reads files).  Everything that pins or verifies file
content goes through here.  Digests are written
``sha256:<hex>``.

- One file is read in ``CHUNK_SIZE`` pieces into one reused buffer (constant
  memory); hashlib releases the GIL on large updates, so several files are
  hashed in parallel on a thread pool.  Small files cost Python work, not
  bytes: a tree's many small files are read by forked worker processes, and
  where nothing of a folder is cached (a first hash) the workers walk a
  share of its folders each and read every small file as they list it
  (``walk_tree(read=Ahead(...))``).
- A tree's unchanged files come from the folder cache
  (``ftmanifest.foldercache``: a compact state per folder, compared with the
  walk as two byte strings), other files' from the stat cache.
- A file whose stat (device, inode, size, mtime_ns, ctime_ns) differs before
  and after reading, or whose byte count differs from its size, raises
  ``FileChangedError`` and is never cached.
- ``count=<format>`` also counts the file's records (``ftmanifest.counts``)
  from the same chunks; for a file over one chunk, while CPUs are free, the
  hash runs on a helper thread as the reading thread counts.  json and
  parquet cannot be counted while streaming: they are read again after the
  hash, and the stat must not have moved in between.  Counts are cached by
  content digest; a cached digest without a cached count is read again.
- ``settle=True`` waits (at most ``RACY_NS``, once) until files modified in
  the last ``RACY_NS`` can be cached before reading them, so that the next
  run costs a ``stat`` (``lock`` uses it; see ``ftmanifest.statcache``).
- Nothing but a regular file is ever opened; anything else is reported as
  ``UnreadableFileError`` naming its kind (FIFO, socket, character device,
  block device, directory).
- Tree digest: sha256 over ``relpath_utf8 NUL digest LF`` for each regular
  file, sorted by the UTF-8 bytes of its '/'-separated relative path.  Empty
  folders do not count.  ``.git`` is skipped.  Symlinks are followed only
  when they resolve inside ``symlink_root`` (default: the tree's root): a
  link to a file is hashed as its target's content under the link's own
  name, a link to a folder is walked (a loop is an error), a link that
  resolves outside raises ``SymlinkEscapeError``.  Sockets, FIFOs and
  devices (or links to them) are listed like files, never opened: hashing
  reports each as an error, so ``hash_tree`` refuses a folder holding one.
"""

from __future__ import annotations

import hashlib
import io
import os
import queue
import re
import stat
import struct
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

from ftmanifest import counts, foldercache, held, statcache
from ftmanifest.counts import Counter, RecordCountError
from ftmanifest.errors import FtManifestError, InputError, InputNotFoundError
from ftmanifest.progress import ProgressSink
from ftmanifest.statcache import StatCache, StatKey, is_racy

ALGORITHM = "sha256"
CHUNK_SIZE = 1 << 20  # 1 MiB: measured as fast as 4 MiB and less memory per worker
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_DIGEST_RE = re.compile(r"[a-z0-9][a-z0-9-]*:[0-9a-f]+")

StrPath: TypeAlias = "str | os.PathLike[str]"
CountSpec: TypeAlias = "str | Mapping[Path, str | None] | None"
_KINDS = (
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISDIR, "directory"),
)


class FileChangedError(InputError):
    """A file changed while it was being hashed."""

    reason = "file-changed-while-read"


class UnreadableFileError(InputError):
    """A file exists but cannot be read (permission, I/O error, not a file)."""

    reason = "unreadable-file"


class SymlinkEscapeError(InputError):
    """A symlink inside a hashed tree resolves outside the allowed folder."""

    reason = "symlink-escape"


@dataclass(frozen=True)
class FileDigest:
    digest: str  # "sha256:<hex>"
    size: int
    records: int | None = None  # with count=: records in the format asked for, else None


@dataclass(frozen=True)
class TreeResult:
    files: Mapping[str, FileDigest]  # '/'-separated relative path -> digest, sorted
    digest: str  # tree_digest over files
    records: int | None = None  # with count=: the sum, None when a file has no count
    size: int = 0  # bytes in all files


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


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # respects taskset/cgroup cpusets
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_workers(n_files: int) -> int:
    """CPUs this process may use, at most one per file, at least one."""
    return max(1, min(_cpus(), n_files))


def hash_file(
    path: StrPath,
    *,
    use_cache: bool = True,
    cache: StatCache | None = None,
    progress: ProgressSink | None = None,
    count: str | None = None,
    settle: bool = False,
) -> FileDigest:
    """Digest of one file; raises an ``InputError`` subclass naming the path."""
    p = Path(path)
    result = hash_files(
        [p],
        use_cache=use_cache,
        cache=cache,
        progress=progress,
        workers=1,
        count=count,
        settle=settle,
    )[p]
    if isinstance(result, FtManifestError):
        raise result
    return result


def hash_files(
    paths: Iterable[StrPath],
    *,
    use_cache: bool = True,
    workers: int | None = None,
    progress: ProgressSink | None = None,
    cache: StatCache | None = None,
    count: CountSpec = None,
    settle: bool = False,
) -> dict[Path, FileDigest | FtManifestError]:
    """Digest every path, in parallel; never stops at the first error.

    Returns, in input order, a ``FileDigest`` or the error for each path
    (``InputNotFoundError``, ``UnreadableFileError``, ``FileChangedError``,
    ``RecordCountError`` carrying the digest).  ``use_cache=False`` neither
    reads nor writes the stat cache.  ``cache`` defaults to the user's cache
    (``statcache.cache_dir()``).  ``count``: a format for every path or one
    per path (see the module doc); ``settle``: see the module doc.
    """
    # Pre-filled in input order; every value is set below.
    results: dict[Path, FileDigest | FtManifestError] = dict.fromkeys(  # type: ignore[assignment]
        p if isinstance(p, Path) else Path(p) for p in paths
    )
    formats = _formats(results, count)
    own_cache = use_cache and cache is None
    active = (StatCache() if cache is None else cache) if use_cache else None
    try:
        seen: list[_Job] = []
        for p in results:
            name = os.fspath(p)
            try:
                st = os.stat(name)
            except OSError as exc:
                results[p] = _os_error(p, exc)
                continue
            if stat.S_ISREG(st.st_mode):
                seen.append(_Job(p, os.path.abspath(name), st, formats.get(p)))
            else:
                results[p] = _not_regular(p, st.st_mode)
        _hash_jobs(seen, results, active, progress, workers, settle)
    finally:
        if active is not None:
            active.close() if own_cache else active.flush()
    return results


def _hash_jobs(
    jobs: list[_Job],
    results: dict[Any, FileDigest | FtManifestError],
    cache: StatCache | None,
    progress: ProgressSink | None,
    workers: int | None,
    settle: bool,
) -> None:
    """Every job's digest into ``results[job.path]``: from the cache, else read."""
    todo = _from_cache(jobs, results, cache)
    for job in todo:
        if progress is not None:
            progress.add_total(job.st.st_size)
    if settle and cache is not None:
        todo = _hash_settled(todo, results, cache, progress, workers)
    _hash_all(todo, results, cache, progress, workers)


def from_cache(
    paths: Iterable[StrPath], *, cache: StatCache, count: CountSpec = None
) -> dict[Path, FileDigest]:
    """What ``hash_files`` would take from ``cache`` for ``paths``, reading no file.

    The paths it leaves out (missing, not regular, not cached, cached without
    the count asked for) are the ones ``hash_files`` would read or report.
    ``distributed.shard`` asks this first, so that a second verify over the
    job sends only what no rank's cache knows.
    """
    order = [p if isinstance(p, Path) else Path(p) for p in paths]  # a Path is not parsed again
    results: dict[Path, FileDigest | FtManifestError] = {}
    formats = _formats(order, count)
    jobs = []
    for p in order:
        try:
            st = os.stat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            jobs.append(_Job(p, os.path.abspath(p), st, formats.get(p)))
    _from_cache(jobs, results, cache)
    return {p: r for p, r in results.items() if isinstance(r, FileDigest)}


def _formats(paths: Iterable[Path], count: CountSpec) -> dict[Path, str]:
    """The format to count each path in, for the formats that have a count here."""
    if count is None:
        return {}
    if isinstance(count, str):
        wanted: dict[Path, str | None] = dict.fromkeys(paths, count)
    else:
        wanted = {Path(p): fmt for p, fmt in count.items()}
    return {p: fmt for p, fmt in wanted.items() if fmt and counts.cache_key(fmt)}


def _from_cache(
    jobs: list[_Job],
    results: dict[Any, FileDigest | FtManifestError],
    cache: StatCache | None,
) -> list[_Job]:
    """Fill in what the cache knows (digest, and count when asked); the rest must be read."""
    if cache is None:
        return jobs
    items = [
        (job.abspath, StatKey.of(job.st)) for job in jobs if isinstance(job.st, os.stat_result)
    ]
    known = cache.lookup_many(items, ALGORITHM)
    kinds = {fmt: _kind(fmt) for fmt in {job.fmt for job in jobs} if fmt}
    wanted = {
        (known[job.abspath], kinds[job.fmt]) for job in jobs if job.fmt and job.abspath in known
    }
    counted = cache.lookup_records(sorted(wanted)) if wanted else {}
    todo = []
    for job in jobs:
        digest = known.get(job.abspath)
        n = counted.get((digest, kinds[job.fmt])) if digest and job.fmt else None
        if digest is None or (job.fmt and n is None):
            todo.append(job)  # a digest without the count asked for is read again
        else:
            results[job.path] = FileDigest(digest, job.st.st_size, n)
    return todo


def _kind(fmt: str | None) -> str:
    kind = counts.cache_key(fmt) if fmt else None
    assert kind is not None, fmt  # _formats keeps countable formats only
    return kind


def _changed_at(st: os.stat_result | _Stat) -> int:
    return max(st.st_mtime_ns, st.st_ctime_ns)


def _hash_settled(
    todo: list[_Job],
    results: dict[Path, FileDigest | FtManifestError],
    cache: StatCache | None,
    progress: ProgressSink | None,
    workers: int | None,
    on_hashed: Callable[[_Job, _Hashed], None] | None = None,
) -> list[_Job]:
    """Hash the files that are not racy; return the racy ones once they no longer are."""
    now, window = time.time_ns(), statcache.RACY_NS
    racy = [job for job in todo if _changed_at(job.st) >= now - window]
    ready = [job for job in todo if _changed_at(job.st) < now - window]
    _hash_all(ready, results, cache, progress, workers, on_hashed)
    if racy:
        _wait_past(max(_changed_at(job.st) for job in racy))
    return racy


def _wait_past(changed_at: int) -> None:
    """Sleep until a file changed at ``changed_at`` is no longer racy (at most a window)."""
    window = statcache.RACY_NS
    # +1 ms: the clock a file is stamped with may run a tick behind time.time_ns().
    wait_ns = min(changed_at + window + 1_000_000 - time.time_ns(), window + 1_000_000)
    if wait_ns > 0:  # a future mtime: give up after one window
        time.sleep(wait_ns / 1e9)


def _hash_all(
    todo: list[_Job],
    results: dict[Path, FileDigest | FtManifestError],
    cache: StatCache | None,
    progress: ProgressSink | None,
    workers: int | None,
    on_hashed: Callable[[_Job, _Hashed], None] | None = None,
) -> None:
    """Hash every job into ``results`` (and ``cache``); ``on_hashed`` sees each digest
    with the stat it was read under."""
    if not todo:
        return
    cancel = threading.Event()
    n = min(workers or default_workers(len(todo)), len(todo))
    overlap = 2 * n <= _cpus()  # a spare CPU per worker for a helper thread
    keeper = held.current()  # read here: pool threads do not see this context

    def attempt(job: _Job) -> _Outcome:
        try:
            hashed, fd = _hash_one(job.path, job.fmt, progress, cancel, overlap)
        except FtManifestError as exc:
            return exc
        try:
            if job.fmt and hashed.digest.records is None:
                hashed = _count_after(job, hashed, cache, fd)
            return hashed
        except FtManifestError as exc:
            return exc
        finally:
            if keeper is None or not keeper.keep(job.abspath, fd, hashed.key):
                os.close(fd)

    def record(job: _Job, outcome: _Outcome) -> None:
        if isinstance(outcome, FtManifestError):
            results[job.path] = outcome
            return
        fd, key, hashed_at, same_read = outcome
        results[job.path] = fd
        if on_hashed is not None:
            on_hashed(job, outcome)
        if cache is not None:
            cache.put(job.abspath, ALGORITHM, key, fd.digest, hashed_at_ns=hashed_at)
            if fd.records is not None and (same_read or not is_racy(key, hashed_at)):
                cache.put_records(fd.digest, _kind(job.fmt), fd.records)

    if n <= 1:
        for job in todo:
            record(job, attempt(job))
        return

    # A small file costs its Python more than its bytes, and threads only contend for
    # the GIL over it (100,000 one-line files: 1.5 s on this thread, 6.5 s on two
    # pool threads): small files are hashed here while the pool hashes the large
    # ones, whose reads and hashing release the GIL.
    large = [job for job in todo if job.st.st_size >= SMALL_FILE]
    small = [job for job in todo if job.st.st_size < SMALL_FILE]
    with ThreadPoolExecutor(
        max(1, min(n, len(large))), thread_name_prefix="ftmanifest-hash"
    ) as pool:
        futures = {pool.submit(attempt, job): job for job in large}
        try:
            for job in small:
                record(job, attempt(job))
            for fut in as_completed(futures):
                record(futures[fut], fut.result())
        except BaseException:
            cancel.set()  # KeyboardInterrupt: running workers stop at their next chunk
            pool.shutdown(wait=False, cancel_futures=True)
            raise


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


def _os_error(path: Path, exc: OSError) -> FtManifestError:
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return InputNotFoundError(
            f"file not found: {path}",
            path=str(path),
            observed=reason,
            hint="restore the file or update the manifest",
        )
    return UnreadableFileError(
        f"cannot read {path}: {reason}",
        path=str(path),
        observed=reason,
        hint="check the file's permissions and the disk",
    )


def _not_regular(path: Path, mode: int) -> UnreadableFileError:
    kind = next((name for test, name in _KINDS if test(mode)), f"file type {stat.S_IFMT(mode):o}")
    return UnreadableFileError(
        f"not a regular file: {path} ({kind})",
        path=str(path),
        expected="a regular file",
        observed=kind,
        hint="point the manifest at files, not folders or devices; remove pipes and sockets",
    )


def _changed(path: Path, observed: str) -> FileChangedError:
    return FileChangedError(
        f"file changed while it was being hashed: {path}",
        path=str(path),
        observed=observed,
        hint="wait until whatever writes it has finished, then run again",
    )


# --- trees -------------------------------------------------------------------


def tree_digest(files: Mapping[str, str]) -> str:
    """sha256 over ``relpath NUL digest LF`` per file, sorted by UTF-8 path bytes (pure)."""
    records = []
    for rel, digest in files.items():
        _check_relpath(rel)
        if not _DIGEST_RE.fullmatch(digest):
            raise InputError(
                f"not a digest for {rel!r}: {digest!r}",
                path=rel,
                observed=digest,
                expected="<algorithm>:<lowercase hex>",
            )
        records.append((rel.encode("utf-8"), digest.encode("ascii")))
    records.sort()
    h = hashlib.sha256()
    for rel_b, digest_b in records:
        h.update(rel_b + b"\0" + digest_b + b"\n")
    return f"sha256:{h.hexdigest()}"


def _check_relpath(rel: str) -> None:
    parts = rel.split("/")
    problem = None
    if not rel or "\0" in rel or any(part in ("", ".", "..") for part in parts):
        problem = "a relative path with no empty, '.' or '..' parts and no NUL"
    else:
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            problem = "a file name that is valid UTF-8"
    if problem:
        raise InputError(
            f"bad relative path in a tree: {rel!r} (expected {problem})",
            path=rel,
            expected=problem,
            observed=repr(rel),
            hint="rename the file",
        )


KEY = struct.Struct("<QQqqq")  # a walked entry's stat: device, inode, size, mtime_ns, ctime_ns
_NEVER = -1  # a stored ctime that no file has: a racy file's key never matches


class Walked:
    """What ``walk_tree`` found: every entry but folders under ``root`` (absolute),
    sorted by relative path (UTF-8 byte order), compactly: ``names`` holds each
    relative path in UTF-8 followed by NUL, ``keys`` each entry's ``KEY`` (of a
    symlink's target, which stays inside), ``special`` the index and mode of each
    entry that is not a regular file.  ``top`` is the root as given, for messages.
    ``read``: what ``walk_tree(..., read=...)`` read on the way (see ``ReadAhead``)."""

    __slots__ = ("root", "top", "boundary", "names", "keys", "special", "count", "read")

    def __init__(
        self,
        root: str,
        top: str,
        boundary: str,
        names: bytes,
        keys: bytes,
        special: dict[int, int],
        count: int,
    ) -> None:
        self.root, self.top, self.boundary = root, top, boundary
        self.names, self.keys, self.special, self.count = names, keys, special, count
        self.read: ReadAhead | None = None  # small files read as they were walked

    def rels(self) -> list[str]:
        """Every relative path, in order."""
        return self.names[:-1].decode("utf-8").split("\0") if self.count else []

    def path(self, rel: str) -> str:
        """``rel``'s path under ``top``, as ``os.path.join`` spells it."""
        return os.path.join(self.top, rel)

    @property
    def entries(self) -> list[tuple[str, str]]:
        """(relative path, path) of every entry, in order."""
        return [(rel, self.path(rel)) for rel in self.rels()]


def list_tree(root: StrPath, *, symlink_root: StrPath | None = None) -> dict[str, Path]:
    """Everything but folders under ``root`` by '/'-separated relative path (see module doc)."""
    return {rel: Path(p) for rel, p in walk_tree(root, symlink_root=symlink_root).entries}


class _Out:
    __slots__ = ("names", "keys", "special", "count")

    def __init__(self) -> None:
        self.names, self.keys = bytearray(), bytearray()
        self.special: dict[int, int] = {}
        self.count = 0


def walk_tree(
    root: StrPath, *, symlink_root: StrPath | None = None, read: Ahead | None = None
) -> Walked:
    """``list_tree`` with each entry's stat key (following a symlink that stays inside),
    in path order: one stat per entry, no object kept per entry.  On Linux with two
    CPUs or more, past ``READ_AHEAD_MIN`` entries, forked workers walk a share of the
    folders each (``_walk_reading``); the result is the one walk's.

    ``read``: also read the small regular files on the way, in forked workers that
    walk a share of the folders each (``ReadAhead``): for a first hash, where every
    file must be read anyway, one open and stat a file instead of a stat, then an
    open and two.  Ignored where workers cannot help (see ``_read_ahead``)."""
    top = Path(root)
    if not top.is_dir():
        if not top.exists():
            raise InputNotFoundError(f"folder not found: {top}", path=str(top))
        raise InputError(f"not a folder: {top}", path=str(top), expected="a folder")
    boundary = os.path.realpath(symlink_root if symlink_root is not None else top)
    st = top.stat()
    if _read_ahead_here():  # workers walk a share of the folders each
        return _walk_reading(top, boundary, st, read)
    out = _Out()
    _walk(str(top), "", boundary, {(st.st_dev, st.st_ino)}, out)
    names, keys = bytes(out.names), bytes(out.keys)
    return Walked(os.path.abspath(top), str(top), boundary, names, keys, out.special, out.count)


def _check_name(relpath: str, name: str) -> None:
    """``_check_relpath`` for the last part only: the walk checked the folders above."""
    if not name.isascii() or name in (".", "..") or "\0" in name:
        _check_relpath(relpath)


def _walk(
    folder: str,
    rel: str,
    boundary: str,
    active: set[tuple[int, int]],
    out: _Out,
) -> None:
    """Every entry under ``folder`` into ``out``, in path order: a folder's entries
    sorted by name, a subfolder's name with '/' after it ("a.txt" before "a/b")."""
    names, keys, pack = out.names, out.keys, KEY.pack
    for name, path, st, _ in _listing(folder, rel, boundary, lazy=False):
        assert st is not None
        if path is None:
            if not stat.S_ISREG(st.st_mode):
                out.special[out.count] = st.st_mode
            names += (rel + name).encode("utf-8")
            names += b"\0"
            keys += pack(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            out.count += 1
            continue
        _walk(path, rel + name, boundary, _enter(active, st, path), out)


def _enter(active: set[tuple[int, int]], st: os.stat_result, path: str) -> set[tuple[int, int]]:
    """The folders above and ``path``'s, or an error when ``path`` is one of them."""
    ident = (st.st_dev, st.st_ino)
    if ident in active:
        raise InputError(f"symlink loop at {path}", path=path)
    return active | {ident}


_Found: TypeAlias = "tuple[str, str | None, os.stat_result | None, os.DirEntry[str] | None]"


def _listing(folder: str, rel: str, boundary: str, *, lazy: bool) -> list[_Found]:
    """``folder``'s entries sorted as the walk takes them: (name, with '/' after a
    folder's; the folder's path or None; the stat; the entry).  ``lazy``: a regular
    file by its directory entry is not stat'ed (its reader stats what it opens), and
    comes with its entry and no stat."""
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError as exc:
        raise _os_error(Path(folder), exc) from exc
    found: list[_Found] = []
    for entry in entries:
        name = entry.name
        if name == ".git":
            continue
        _check_name(rel + name, name)
        if lazy and entry.is_file(follow_symlinks=False):  # d_type: no stat, no link
            found.append((name, None, None, entry))
            continue
        st = _entry_stat(entry, boundary)
        if stat.S_ISDIR(st.st_mode):
            found.append((name + "/", entry.path, st, None))
        else:  # a file, or a FIFO, socket or device: hashing refuses those without opening them
            found.append((name, None, st, None))
    found.sort(key=_first)  # str order is code point order, which is UTF-8 byte order
    return found


def _entry_stat(entry: os.DirEntry[str], boundary: str) -> os.stat_result:
    """The entry's stat, a symlink's target's when it stays inside ``boundary``."""
    try:
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            if os.path.commonpath([target, boundary]) != boundary:
                raise SymlinkEscapeError(
                    f"symlink {entry.path} resolves outside {boundary}: {target}",
                    path=entry.path,
                    expected=f"a target inside {boundary}",
                    observed=target,
                    hint="copy the file into the folder or remove the link",
                )
            return os.stat(entry.path)  # follows the symlink, now known to stay inside
        return entry.stat(follow_symlinks=False)
    except FileNotFoundError as exc:
        raise InputNotFoundError(
            f"broken symlink: {entry.path}", path=entry.path, observed=str(exc.strerror)
        ) from exc
    except OSError as exc:
        raise _os_error(Path(entry.path), exc) from exc


def _first(item: _Found) -> str:
    return item[0]


@dataclass(frozen=True)
class Ahead:
    """What ``walk_tree(read=...)`` reads: ``count`` also counts each file's records,
    in ``declared`` when given, else in its own suffix's format (``counts.format_of``)."""

    count: bool = False
    declared: str | None = None


class ReadAhead:
    """Small files read during a walk, by index: ``done[i]`` is 1 where ``digests``
    and ``tallies`` hold file i's (its key is the walk's: the stat of what was read);
    ``racy`` the indices modified too recently to cache; ``kinds`` the formats
    records were counted in."""

    __slots__ = ("digests", "tallies", "done", "racy", "kinds", "nbytes")

    def __init__(self) -> None:
        self.digests = bytearray()
        self.tallies = array("q")
        self.done = bytearray()
        self.racy: list[int] = []
        self.kinds: set[str] = set()
        self.nbytes = 0


class _ReadOut(_Out):
    __slots__ = ("read", "ahead")

    def __init__(self, ahead: Ahead | None) -> None:
        super().__init__()
        self.read = ReadAhead()
        self.ahead = ahead


READ_AHEAD_MIN = 4096  # entries walked here before workers take the rest
_SPLIT = 16  # folders per worker wanted before the walk is shared out
_READING: tuple[str, Ahead | None] | None = None  # what forked walkers read: the boundary, the ask


def _read_ahead_here() -> bool:
    """Worker processes walk and read: on Linux (fork), with two CPUs or more.  While
    files are held open (``held``), the first ones it has room for are read again
    in this process by the hash, which keeps them (``_hash_walked``)."""
    return sys.platform == "linux" and _cpus() > 1 and not _daemonic()


def _daemonic() -> bool:
    """In a pool's worker process, which may not start processes of its own."""
    import multiprocessing

    return bool(multiprocessing.current_process().daemon)


def _walk_reading(top: Path, boundary: str, st: os.stat_result, ahead: Ahead | None) -> Walked:
    """``walk_tree``: the first folders here, until ``READ_AHEAD_MIN`` entries, then
    every folder left, in path order, by forked workers, each walking its folder
    whole (``_walk``, or with ``ahead`` reading it too: ``_walk_read``); their results
    are joined in order.  A folder a worker could not walk is walked here again, which
    raises its error: the first in path order, as one walk would."""
    import multiprocessing

    global _READING
    out = _ReadOut(ahead)
    walk = _walk if ahead is None else _walk_read
    pending = _plan(str(top), boundary, {(st.st_dev, st.st_ino)})
    while pending and (out.count < READ_AHEAD_MIN or not isinstance(pending[0][0], str)):
        path, rel, active = pending.pop(0)
        if isinstance(path, str):
            walk(path, rel, boundary, active, out)
        else:
            _add_file(out, rel, path)
    if any(isinstance(item[0], str) for item in pending):
        _READING = (boundary, ahead)
        try:
            folders = [item for item in pending if isinstance(item[0], str)]
            with multiprocessing.get_context("fork").Pool(default_workers(len(folders))) as pool:
                results = pool.imap(_walk_piece, folders)
                for path, rel, active in pending:
                    if not isinstance(path, str):
                        _add_file(out, rel, path)
                        continue
                    got = next(results)
                    if got is None:
                        walk(path, rel, boundary, active, out)  # raises what the worker hit
                    else:
                        _join(out, got)
        finally:
            _READING = None
    walked = Walked(
        os.path.abspath(top), str(top), boundary, bytes(out.names), bytes(out.keys),
        out.special, out.count,
    )  # fmt: skip
    walked.read = out.read if ahead is not None else None  # walked only: nothing read
    return walked


# A folder to walk whole (its path), or a file found while cutting (its stat).
_Item: TypeAlias = "tuple[str | os.stat_result, str, set[tuple[int, int]]]"


def _plan(folder: str, boundary: str, active: set[tuple[int, int]]) -> list[_Item]:
    """The walk cut into pieces in path order: a folder to walk whole, or a file
    found while cutting (path: its stat).  Folders are opened level by level until
    there are ``_SPLIT`` for each CPU, or no more."""
    items: list[_Item] = [(folder, "", active)]
    for _ in range(4):
        folders = sum(1 for path, _, _ in items if isinstance(path, str))
        if not folders or folders >= _SPLIT * _cpus():
            break
        cut: list[_Item] = []
        for path, rel, above in items:
            if not isinstance(path, str):
                cut.append((path, rel, above))
                continue
            for name, sub, st, _ in _listing(path, rel, boundary, lazy=False):
                assert st is not None
                if sub is None:
                    cut.append((st, rel + name, above))
                else:
                    cut.append((sub, rel + name, _enter(above, st, sub)))
        items = cut
    return items


def _add_file(out: _ReadOut, rel: str, st: os.stat_result) -> None:
    """An entry found while cutting the walk: listed, not read (the hash reads it)."""
    if not stat.S_ISREG(st.st_mode):
        out.special[out.count] = st.st_mode
    out.names += rel.encode("utf-8") + b"\0"
    out.keys += KEY.pack(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if out.ahead is not None:
        out.read.digests += bytes(32)
        out.read.tallies.append(-1)
        out.read.done.append(0)
    out.count += 1


def _walk_piece(item: _Item) -> tuple[bytes, ...] | None:
    """In a worker: ``_walk`` or ``_walk_read`` of one folder, packed; None where it
    raised (the parent walks it again to raise the error)."""
    assert _READING is not None
    boundary, ahead = _READING
    path, rel, active = item
    assert isinstance(path, str)
    out = _ReadOut(ahead)
    try:
        (_walk if ahead is None else _walk_read)(path, rel, boundary, active, out)
    except FtManifestError:
        return None
    r = out.read
    special = struct.pack(
        f"<{2 * len(out.special)}q", *(x for kv in out.special.items() for x in kv)
    )
    return (
        bytes(out.names), bytes(out.keys), bytes(r.digests), r.tallies.tobytes(), bytes(r.done),
        array("q", r.racy).tobytes(), special, "\0".join(sorted(r.kinds)).encode("utf-8"),
        struct.pack("<qq", out.count, r.nbytes),
    )  # fmt: skip


def _join(out: _ReadOut, got: tuple[bytes, ...]) -> None:
    """A worker's piece after what ``out`` holds."""
    names, keys, digests, tallies, done, racy, special, kinds, sizes = got
    base = out.count
    count, nbytes = struct.unpack("<qq", sizes)
    out.names += names
    out.keys += keys
    pairs = array("q", special)
    for k in range(0, len(pairs), 2):
        out.special[base + pairs[k]] = pairs[k + 1]
    out.count += count
    if out.ahead is None:
        return
    r = out.read
    r.digests += digests
    r.tallies.frombytes(tallies)
    r.done += done
    r.racy.extend(base + i for i in array("q", racy))
    if kinds:
        r.kinds.update(kinds.decode("utf-8").split("\0"))
    r.nbytes += nbytes


def _walk_read(
    folder: str, rel: str, boundary: str, active: set[tuple[int, int]], out: _ReadOut
) -> None:
    """``_walk`` that also reads each small regular file as it comes.

    A regular file by its directory entry is opened with O_NOFOLLOW; its key is the
    stat of what was opened, and it is taken only when small and held still (the
    descriptor's stat the same after one read of its size and a byte more).  Else
    it is left for the hash to read, which says what changed; what cannot be opened
    is stat'ed as the walk would (a name that is a link now is not followed).
    Counts are taken in ``declared``, else in the format the name's suffix guesses
    (``_hash_walked`` keeps them only where that was the folder's)."""
    names, keys, pack = out.names, out.keys, KEY.pack
    r = out.read
    digests, tallies, done, kinds = r.digests, r.tallies, r.done, r.kinds
    assert out.ahead is not None
    counting, declared = out.ahead.count, out.ahead.declared
    open_, fstat, read, close, sha256 = os.open, os.fstat, os.read, os.close, hashlib.sha256
    is_reg, small, count_whole = stat.S_ISREG, SMALL_FILE, counts.count_whole
    since = time.time_ns() - statcache.RACY_NS
    recent: list[int] = []
    i, nbytes = out.count, 0
    for name, path, st, entry in _listing(folder, rel, boundary, lazy=True):
        if path is not None:
            assert st is not None
            out.count = i
            _walk_read(path, rel + name, boundary, _enter(active, st, path), out)
            i = out.count
            continue
        got = None
        if entry is not None:  # regular by its directory entry
            try:
                fd = open_(entry.path, _NOFOLLOW)
            except OSError:
                st = _entry_stat(entry, boundary)
            else:
                try:
                    st = fstat(fd)
                    size = st.st_size
                    if size < small and is_reg(st.st_mode):
                        data = read(fd, size + 1)
                        after = fstat(fd)
                        still = (after.st_mtime_ns, after.st_ctime_ns, after.st_size) == (
                            st.st_mtime_ns, st.st_ctime_ns, size
                        )  # fmt: skip
                        if still and len(data) == size:
                            got = data
                except OSError:
                    st = _entry_stat(entry, boundary)
                finally:
                    close(fd)
        assert st is not None
        mode = st.st_mode
        if not is_reg(mode):
            out.special[i] = mode
        tally = -1
        if got is not None and counting:
            kind = declared or (name[name.rfind(".") + 1 :] if "." in name else "")
            try:
                n = count_whole(kind, got)
            except FtManifestError:
                got = None  # read again by the hash, which says why it cannot be counted
            else:
                if n is not None:
                    tally = n
                    kinds.add(kind.lower())
        mtime, ctime = st.st_mtime_ns, st.st_ctime_ns
        if got is None:
            digests += _NO_DIGEST
            done.append(0)
        else:
            digests += sha256(got).digest()
            done.append(1)
            nbytes += len(got)
            if mtime >= since or ctime >= since:
                recent.append(i)
        tallies.append(tally)
        names += f"{rel}{name}\0".encode()
        keys += pack(st.st_dev, st.st_ino, st.st_size, mtime, ctime)
        i += 1
    out.count = i
    r.nbytes += nbytes
    if recent:  # racy as the hash judges it: against a moment after every read here
        since = time.time_ns() - statcache.RACY_NS
        r.racy.extend(i for i in recent if max(KEY.unpack_from(keys, i * KEY.size)[3:5]) >= since)


_NO_DIGEST = bytes(32)
_NOFOLLOW = _OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0)


class TreeFiles(Mapping[str, FileDigest]):
    """A hashed tree's files by relative path, in path order, kept as the folder
    cache's arrays (``ftmanifest.foldercache``) and read on demand."""

    def __init__(
        self, names: bytes, keys: bytes, digests: bytes, counts: array[int] | None, count: int
    ) -> None:
        self.names, self.stats, self.digests, self.counts = names, keys, digests, counts
        self.count = count
        self.stored: Path | None = None  # the folder cache's state for these files
        self._index: dict[str, int] | None = None

    def _rels(self) -> list[str]:
        return self.names[:-1].decode("utf-8").split("\0") if self.count else []

    def _at(self, i: int) -> FileDigest:
        size = KEY.unpack_from(self.stats, i * KEY.size)[2]
        n = self.counts[i] if self.counts is not None else -1
        digest = f"{ALGORITHM}:{self.digests[i * 32 : i * 32 + 32].hex()}"
        return FileDigest(digest, size, None if n < 0 else n)

    def __getitem__(self, rel: str) -> FileDigest:
        if self._index is None:
            self._index = {r: i for i, r in enumerate(self._rels())}
        return self._at(self._index[rel])

    def __iter__(self) -> Iterator[str]:
        return iter(self._rels())

    def __len__(self) -> int:
        return self.count

    def items(self) -> Any:  # in order, without the index
        return ((rel, self._at(i)) for i, rel in enumerate(self._rels()))

    def values(self) -> Any:
        return (self._at(i) for i in range(self.count))

    def size(self) -> int:
        """Bytes in all files."""
        sizes: Any = memoryview(self.stats).cast("q")[2::5]
        return sum(sizes)

    def records(self) -> Iterator[bytes]:
        """The tree digest's input (``relpath NUL digest LF`` each), in chunks; joined
        by C loops (zip over the names and the hex split at once), not a Python one."""
        import binascii
        from itertools import chain, repeat

        head = f"\0{ALGORITHM}:".encode("ascii")
        rels = self.names.split(b"\0")
        step = 4096
        for start in range(0, self.count, step):
            end = min(start + step, self.count)
            hexes = binascii.hexlify(self.digests[start * 32 : end * 32], b" ", 32).split(b" ")
            parts = zip(rels[start:end], repeat(head), hexes, repeat(b"\n"))
            yield b"".join(chain.from_iterable(parts))


def hash_tree(
    root: StrPath,
    *,
    use_cache: bool = True,
    workers: int | None = None,
    progress: ProgressSink | None = None,
    cache: StatCache | None = None,
    symlink_root: StrPath | None = None,
    count: str | None = None,
    settle: bool = False,
    hasher: Callable[..., dict[Path, FileDigest | FtManifestError]] | None = None,
    walked: Walked | None = None,
) -> TreeResult:
    """Digest every file under ``root`` and the tree; raises the first error by path.

    For per-file errors, call ``list_tree`` then ``hash_files`` and ``tree_digest``.
    For a Hugging Face cache snapshot, pass the repository folder
    (``models--org--name``) as ``symlink_root``: snapshot files link to ``../../blobs``.
    ``count``: count every file's records in that format (``TreeResult.records``).
    ``hasher``: a function with ``hash_files``'s signature (the distributed one).
    ``walked``: ``walk_tree(root, ...)`` when the caller already walked it.
    Unchanged files come from the folder cache (``ftmanifest.foldercache``) in the
    directory of ``cache`` (default: the user's cache), not the stat cache.
    """
    walked = walk_tree(root, symlink_root=symlink_root) if walked is None else walked
    if hasher is None:
        return _hash_walked(walked, use_cache, workers, progress, cache, count, settle)
    listing = {rel: Path(p) for rel, p in walked.entries}
    by_path = hasher(
        listing.values(),
        use_cache=use_cache,
        workers=workers,
        progress=progress,
        cache=cache,
        count=count,
        settle=settle,
    )
    files: dict[str, FileDigest] = {}
    for rel, p in listing.items():
        result = by_path[p]
        if isinstance(result, FtManifestError):
            raise result
        files[rel] = result
    counted = [fd.records for fd in files.values()]
    total = sum(n for n in counted if n is not None) if count and None not in counted else None
    h = hashlib.sha256()  # tree_digest over names the walk checked, in the walk's order
    for rel, fd in files.items():
        h.update(rel.encode("utf-8") + b"\0" + fd.digest.encode("ascii") + b"\n")
    size = sum(fd.size for fd in files.values())
    return TreeResult(files, f"sha256:{h.hexdigest()}", total, size)


def _hash_walked(
    walked: Walked,
    use_cache: bool,
    workers: int | None,
    progress: ProgressSink | None,
    cache: StatCache | None,
    count: str | None,
    settle: bool,
) -> TreeResult:
    """``hash_tree`` without a distributed hasher: the folder cache's unchanged files,
    then every other file read (see ``foldercache``)."""
    fmt = count if count and counts.cache_key(count) else None
    kind = counts.cache_key(fmt) if fmt else None
    n = walked.count
    where = (cache.directory if cache is not None else statcache.cache_dir()) if use_cache else None
    prev = foldercache.load(where, walked.root, walked.boundary) if where is not None else None
    if prev is not None and fmt and prev.kind != kind:
        prev = None  # counts in another kind: every file is read again
    keys = bytearray(walked.keys)
    digests = bytearray(prev.digests) if prev is not None and prev.names == walked.names else None
    tallies = array("q")
    read = walked.read if prev is None else None
    if read is not None:  # read while walked: only what was not is read now
        digests = read.digests
        if fmt and read.kinds <= {fmt.lower()}:
            tallies = read.tallies
        else:
            tallies.frombytes(b"\xff" * (8 * n))
        for i in read.racy:  # never matched next time, as _hash_indices stores them
            KEY.pack_into(keys, i * KEY.size, *KEY.unpack_from(keys, i * KEY.size)[:4], _NEVER)
        todo = _unread(read.done)
        if progress is not None:  # read already: counted as done
            progress.add_total(read.nbytes)
            progress.advance(read.nbytes)
        keeper = held.current()  # the files it has room for are read again, and kept open
        again = _first_read(read.done, keeper.room()) if keeper is not None else []
        if settle:  # read again once they are no longer racy
            again += read.racy
        if again:
            todo = sorted(set(todo).union(again))
    elif digests is not None and prev is not None:
        tallies.frombytes(prev.counts)
        todo = _changed_keys(walked.keys, prev.keys, n)
    else:
        digests = bytearray(32 * n)
        tallies.frombytes(b"\xff" * (8 * n))
        todo = _merge(walked, prev, digests, tallies) if prev is not None else list(range(n))
    if fmt:
        todo = sorted(set(todo) | {i for i, t in enumerate(tallies) if t < 0})
    todo = [i for i in todo if i not in walked.special]
    errors: dict[int, FtManifestError] = {}
    for i, mode in walked.special.items():
        errors[i] = _not_regular(Path(walked.path(_rel_at(walked.names, i))), mode)
    if cache is not None:
        fresh = len(todo) if read is None else n - len(walked.special)
        cache.hits += n - fresh - len(walked.special)
        cache.misses += fresh
    _hash_indices(walked, todo, fmt, keys, digests, tallies, errors, progress, workers, settle)
    if errors:
        raise errors[min(errors)]
    files = TreeFiles(walked.names, bytes(keys), bytes(digests), tallies if fmt else None, n)
    if prev is not None and not todo and prev.names == walked.names and prev.keys == walked.keys:
        digest, files.stored = prev.digest, prev.file  # nothing changed, nothing to store
    else:
        h = hashlib.sha256()
        for chunk in files.records():
            h.update(chunk)
        digest = f"sha256:{h.hexdigest()}"
        if where is not None:
            state = foldercache.State(
                walked.root, walked.boundary, digest, kind or (prev.kind if prev else None), n,
                walked.names, files.stats, tallies.tobytes(), files.digests,
            )  # fmt: skip
            files.stored = foldercache.store(where, state)
    total = sum(tallies) if fmt and n else (0 if fmt else None)
    return TreeResult(files, digest, total, files.size())


def _first_read(done: bytearray, k: int) -> list[int]:
    """The first ``k`` indices where ``done`` is 1."""
    out: list[int] = []
    i = done.find(1) if k else -1
    while i >= 0 and len(out) < k:
        out.append(i)
        i = done.find(1, i + 1)
    return out


def _unread(done: bytearray) -> list[int]:
    """The indices where ``done`` is 0."""
    out, i = [], done.find(0)
    while i >= 0:
        out.append(i)
        i = done.find(0, i + 1)
    return out


def _rel_at(names: bytes, i: int) -> str:
    return names.split(b"\0")[i].decode("utf-8")


def _changed_keys(here: bytes, stored: bytes, n: int) -> list[int]:
    """Indices whose key differs, comparing 1,024 keys at a time."""
    size, step, out = KEY.size, 1024, []
    for start in range(0, n, step):
        lo, hi = start * size, min(n, start + step) * size
        if here[lo:hi] != stored[lo:hi]:
            for i in range(start, min(n, start + step)):
                if here[i * size : (i + 1) * size] != stored[i * size : (i + 1) * size]:
                    out.append(i)
    return out


def _merge(walked: Walked, prev: Any, digests: bytearray, tallies: array[int]) -> list[int]:
    """The files added or changed since ``prev``, with the others' digests and counts
    copied from it: a merge of the two sorted lists of names."""
    size = KEY.size
    old = prev.names.split(b"\0")[:-1] if prev.count else []
    old_at = {name: j for j, name in enumerate(old)}
    stored_counts = array("q")
    stored_counts.frombytes(prev.counts)
    todo = []
    for i, name in enumerate(walked.names.split(b"\0")[:-1] if walked.count else []):
        j = old_at.get(name)
        if (
            j is None
            or walked.keys[i * size : (i + 1) * size] != prev.keys[j * size : (j + 1) * size]
        ):
            todo.append(i)
            continue
        digests[i * 32 : i * 32 + 32] = prev.digests[j * 32 : j * 32 + 32]
        tallies[i] = stored_counts[j]
    return todo


def _hash_indices(
    walked: Walked,
    todo: list[int],
    fmt: str | None,
    keys: bytearray,
    digests: bytearray,
    tallies: array[int],
    errors: dict[int, FtManifestError],
    progress: ProgressSink | None,
    workers: int | None,
    settle: bool,
) -> None:
    """Read the files at ``todo``; their keys, digests and counts into the arrays."""
    if not todo:
        return
    rels = walked.names.split(b"\0")
    if _forkable(len(todo), workers):
        todo = _hash_forked(walked, rels, todo, fmt, keys, digests, tallies, progress, settle)
    top = walked.root.rstrip("/")
    at: dict[Path, int] = {}
    jobs = []
    for i in todo:
        rel = rels[i].decode("utf-8")
        path = Path(walked.path(rel))
        dev, ino, size, mtime, ctime = KEY.unpack_from(walked.keys, i * KEY.size)
        at[path] = i
        jobs.append(_Job(path, f"{top}/{rel}", _Stat(size, mtime, ctime), fmt))
        if progress is not None:
            progress.add_total(size)
    results: dict[Path, FileDigest | FtManifestError] = {}

    def hashed(job: _Job, outcome: _Hashed) -> None:
        i = at[job.path]
        key = outcome.key
        racy = statcache.is_racy(key, outcome.hashed_at)
        KEY.pack_into(keys, i * KEY.size, key.dev % (1 << 64), key.ino % (1 << 64), key.size,
                      key.mtime_ns, _NEVER if racy else key.ctime_ns)  # fmt: skip
        digests[i * 32 : i * 32 + 32] = bytes.fromhex(outcome.digest.digest.partition(":")[2])
        n = outcome.digest.records
        tallies[i] = -1 if n is None else n

    if settle:
        jobs = _hash_settled(jobs, results, None, progress, workers, hashed)
    _hash_all(jobs, results, None, progress, workers, hashed)
    for path, result in results.items():
        if isinstance(result, FtManifestError):
            errors[at[path]] = result


FORK_MIN = 4096  # small files to read past which worker processes read them
_FORKED: tuple[Walked, list[bytes], str | None] | None = None  # what forked workers read


def _forkable(n_files: int, workers: int | None) -> bool:
    """Worker processes for many small files: Python's per-file work holds the GIL, so
    threads do not help (``_hash_all``).  Forked, so they start in milliseconds and
    share the walk; only on Linux."""
    n = workers or default_workers(n_files)
    return n > 1 and n_files >= FORK_MIN and sys.platform == "linux" and not _daemonic()


def _hash_forked(
    walked: Walked,
    rels: list[bytes],
    todo: list[int],
    fmt: str | None,
    keys: bytearray,
    digests: bytearray,
    tallies: array[int],
    progress: ProgressSink | None,
    settle: bool,
) -> list[int]:
    """Read the small files of ``todo`` in worker processes; the indices left to read
    here: large files, the first ones ``held`` has room to keep open, and any a worker
    could not read or saw change (reading them again here reports why)."""
    import multiprocessing

    global _FORKED
    size_at = KEY.size
    small: list[int] = []
    left: list[int] = []
    for i in todo:
        (small if KEY.unpack_from(walked.keys, i * size_at)[2] < SMALL_FILE else left).append(i)
    keeper = held.current()  # the files it has room for are read here, and kept open
    room = min(keeper.room(), len(small)) if keeper is not None else 0
    left.extend(small[:room])
    small = small[room:]
    rounds = [small]
    if settle:  # as _hash_settled: the racy ones once they no longer are
        now = time.time_ns() - statcache.RACY_NS
        stamped = {i: max(KEY.unpack_from(walked.keys, i * size_at)[3:5]) for i in small}
        rounds = [[i for i in small if stamped[i] < now], [i for i in small if stamped[i] >= now]]
    n = default_workers(len(small))
    _FORKED = (walked, rels, fmt)
    try:
        with multiprocessing.get_context("fork").Pool(n) as pool:
            for k, batch in enumerate(rounds):
                if k and batch:
                    _wait_past(max(stamped[i] for i in batch))
                chunks = [batch[at : at + _CHUNK] for at in range(0, len(batch), _CHUNK)]
                for done, packed, failed, nbytes in pool.imap_unordered(_read_chunk, chunks):
                    if done and done[-1] - done[0] + 1 == len(done):  # a run: one copy
                        lo, hi = done[0], done[-1] + 1
                        keys[lo * size_at : hi * size_at] = packed[0]
                        digests[lo * 32 : hi * 32] = packed[1]
                        tallies[lo:hi] = array("q", packed[2])
                        done = []
                    for j, i in enumerate(done):
                        keys[i * size_at : (i + 1) * size_at] = packed[0][
                            j * size_at : (j + 1) * size_at
                        ]
                        digests[i * 32 : i * 32 + 32] = packed[1][j * 32 : j * 32 + 32]
                        tallies[i] = struct.unpack_from("<q", packed[2], j * 8)[0]
                    left.extend(failed)
                    if progress is not None:
                        progress.advance(nbytes)
    finally:
        _FORKED = None
    return sorted(left)


_CHUNK = 2000  # files a worker reads per task


def _read_chunk(chunk: list[int]) -> tuple[list[int], tuple[bytes, bytes, bytes], list[int], int]:
    """In a worker: read the small files at ``chunk``.  Returns the indices read, their
    keys, digests and counts packed, the indices not read, and the bytes read.

    A file is read only when its descriptor's stat is the walk's (the path named this
    file when it was walked), in one read of its size and one more byte, and taken
    only when that read returned exactly its size and the stat held still: else it is
    left for ``_digest_open`` here, which says what changed.
    """
    assert _FORKED is not None
    walked, rels, fmt = _FORKED
    prefix = walked.root.rstrip("/").encode("utf-8") + b"/"
    keys, digests, counted = bytearray(), bytearray(), bytearray()
    done, failed, nbytes = [], [], 0
    pack, unpack, window, sha256 = KEY.pack, KEY.unpack_from, statcache.RACY_NS, hashlib.sha256
    for i in chunk:
        walked_key = unpack(walked.keys, i * KEY.size)
        hashed_at = time.time_ns()
        try:
            fd = os.open(prefix + rels[i], _OPEN_FLAGS)
        except OSError:
            failed.append(i)
            continue
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if key != walked_key or not stat.S_ISREG(st.st_mode):
                failed.append(i)
                continue
            data = os.read(fd, key[2] + 1)
            st = os.fstat(fd)
        except OSError:
            failed.append(i)
            continue
        finally:
            os.close(fd)
        if len(data) != key[2] or (st.st_size, st.st_mtime_ns, st.st_ctime_ns) != key[2:]:
            failed.append(i)
            continue
        n_records = -1
        if fmt:
            counter = counts.counter_for(fmt)
            try:
                if counter is None:
                    raise _Cancelled  # counted after hashing: read here, not in a worker
                counter.feed(memoryview(data))
                n_records = counter.result()
            except (FtManifestError, _Cancelled):
                failed.append(i)  # a record count error: read again here, which says so
                continue
        racy = max(key[3], key[4]) >= hashed_at - window
        keys += pack(*key[:4], _NEVER if racy else key[4])
        digests += sha256(data).digest()
        counted += struct.pack("<q", n_records)
        done.append(i)
        nbytes += key[2]
    return done, (bytes(keys), bytes(digests), bytes(counted)), failed, nbytes
