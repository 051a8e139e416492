"""Streaming, parallel file and tree digests with a stat cache.

Layer: file access (reads files).  Everything that pins or verifies file
content goes through here.  Digests are written
``sha256:<hex>``.

- One file is read in ``CHUNK_SIZE`` pieces into one reused buffer (constant
  memory); hashlib releases the GIL on large updates, so several files are
  hashed in parallel on a thread pool.
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
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

from ftmanifest import counts, held, statcache
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


class UnreadableFileError(InputError):
    """A file exists but cannot be read (permission, I/O error, not a file)."""


class SymlinkEscapeError(InputError):
    """A symlink inside a hashed tree resolves outside the allowed folder."""


@dataclass(frozen=True)
class FileDigest:
    digest: str  # "sha256:<hex>"
    size: int
    records: int | None = None  # with count=: records in the format asked for, else None


@dataclass(frozen=True)
class TreeResult:
    files: dict[str, FileDigest]  # '/'-separated relative path -> digest, sorted
    digest: str  # tree_digest over files
    records: int | None = None  # with count=: the sum, None when a file has no count


class _Job(NamedTuple):
    path: Path  # the key of its result (a tree's own walk keys by relative path)
    abspath: str
    st: os.stat_result
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
    prefix: str | None = None,
) -> None:
    """Every job's digest into ``results[job.path]``: from the cache, else read.
    ``prefix``: every job's absolute path starts with it (one range read of the cache)."""
    todo = _from_cache(jobs, results, cache, prefix)
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
    order = [Path(p) for p in paths]
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
    prefix: str | None = None,
) -> list[_Job]:
    """Fill in what the cache knows (digest, and count when asked); the rest must be read."""
    if cache is None:
        return jobs
    items = [(job.abspath, StatKey.of(job.st)) for job in jobs]
    if prefix is not None and len(items) >= PREFIX_LOOKUP:
        known = cache.lookup_under(prefix, items, ALGORITHM)
    else:
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


PREFIX_LOOKUP = 2000  # jobs under one folder past which the cache is read as one range


def _kind(fmt: str | None) -> str:
    kind = counts.cache_key(fmt) if fmt else None
    assert kind is not None, fmt  # _formats keeps countable formats only
    return kind


def _changed_at(st: os.stat_result) -> int:
    return max(st.st_mtime_ns, st.st_ctime_ns)


def _hash_settled(
    todo: list[_Job],
    results: dict[Path, FileDigest | FtManifestError],
    cache: StatCache,
    progress: ProgressSink | None,
    workers: int | None,
) -> list[_Job]:
    """Hash the files that are not racy; return the racy ones once they no longer are."""
    now, window = time.time_ns(), statcache.RACY_NS
    racy = [job for job in todo if _changed_at(job.st) >= now - window]
    ready = [job for job in todo if _changed_at(job.st) < now - window]
    _hash_all(ready, results, cache, progress, workers)
    if racy:
        # +1 ms: the clock a file is stamped with may run a tick behind time.time_ns().
        until = max(_changed_at(job.st) for job in racy) + window + 1_000_000
        wait_ns = min(until - time.time_ns(), window + 1_000_000)  # a future mtime: give up
        if wait_ns > 0:
            time.sleep(wait_ns / 1e9)
    return racy


def _hash_all(
    todo: list[_Job],
    results: dict[Path, FileDigest | FtManifestError],
    cache: StatCache | None,
    progress: ProgressSink | None,
    workers: int | None,
) -> None:
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


class Walked(NamedTuple):
    """What ``walk_tree`` found: ``root``'s absolute path and every entry but folders,
    as (relative path, path, stat), sorted by relative path (UTF-8 byte order)."""

    root: str
    entries: list[tuple[str, str, os.stat_result]]


def list_tree(root: StrPath, *, symlink_root: StrPath | None = None) -> dict[str, Path]:
    """Everything but folders under ``root`` by '/'-separated relative path (see module doc)."""
    return {rel: Path(p) for rel, p, _ in walk_tree(root, symlink_root=symlink_root).entries}


def walk_tree(root: StrPath, *, symlink_root: StrPath | None = None) -> Walked:
    """``list_tree`` with each entry's stat (following a symlink that stays inside),
    from one walk: one stat per entry, no ``Path`` per entry."""
    top = Path(root)
    if not top.is_dir():
        if not top.exists():
            raise InputNotFoundError(f"folder not found: {top}", path=str(top))
        raise InputError(f"not a folder: {top}", path=str(top), expected="a folder")
    boundary = os.path.realpath(symlink_root if symlink_root is not None else top)
    out: list[tuple[str, str, os.stat_result]] = []
    st = top.stat()
    _walk(str(top), "", boundary, {(st.st_dev, st.st_ino)}, out)
    # str order is code point order, which is UTF-8 byte order (names are checked UTF-8)
    out.sort(key=lambda e: e[0])
    return Walked(os.path.abspath(top), out)


def _check_name(relpath: str, name: str) -> None:
    """``_check_relpath`` for the last part only: the walk checked the folders above."""
    if not name.isascii() or name in (".", "..") or "\0" in name:
        _check_relpath(relpath)


def _walk(
    folder: str,
    rel: str,
    boundary: str,
    active: set[tuple[int, int]],
    out: list[tuple[str, str, os.stat_result]],
) -> None:
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError as exc:
        raise _os_error(Path(folder), exc) from exc
    for entry in entries:
        if entry.name == ".git":
            continue
        relpath = f"{rel}/{entry.name}" if rel else entry.name
        _check_name(relpath, entry.name)
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
                st = os.stat(entry.path)  # follows the symlink, now known to stay inside
            else:
                st = entry.stat(follow_symlinks=False)
        except FileNotFoundError as exc:
            raise InputNotFoundError(
                f"broken symlink: {entry.path}", path=entry.path, observed=str(exc.strerror)
            ) from exc
        except OSError as exc:
            raise _os_error(Path(entry.path), exc) from exc
        if stat.S_ISDIR(st.st_mode):
            ident = (st.st_dev, st.st_ino)
            if ident in active:
                raise InputError(f"symlink loop at {entry.path}", path=entry.path)
            _walk(entry.path, relpath, boundary, active | {ident}, out)
        else:  # a file, or a FIFO, socket or device: hashing refuses those without opening them
            out.append((relpath, entry.path, st))


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
    """
    walked = walk_tree(root, symlink_root=symlink_root) if walked is None else walked
    if hasher is not None:
        listing = {rel: Path(p) for rel, p, _ in walked.entries}
        by_path = hasher(
            listing.values(),
            use_cache=use_cache,
            workers=workers,
            progress=progress,
            cache=cache,
            count=count,
            settle=settle,
        )
        results = {rel: by_path[p] for rel, p in listing.items()}
    else:
        results = _hash_walked(walked, use_cache, workers, progress, cache, count, settle)
    files: dict[str, FileDigest] = {}
    for rel, _, _ in walked.entries:
        result = results[rel]
        if isinstance(result, FtManifestError):
            raise result
        files[rel] = result
    counts = [fd.records for fd in files.values()]
    total = sum(n for n in counts if n is not None) if count and None not in counts else None
    h = hashlib.sha256()  # tree_digest over names the walk checked, in the walk's order
    for rel, fd in files.items():
        h.update(rel.encode("utf-8") + b"\0" + fd.digest.encode("ascii") + b"\n")
    return TreeResult(files, f"sha256:{h.hexdigest()}", total)


def _hash_walked(
    walked: Walked,
    use_cache: bool,
    workers: int | None,
    progress: ProgressSink | None,
    cache: StatCache | None,
    count: str | None,
    settle: bool,
) -> dict[str, FileDigest | FtManifestError]:
    """``hash_files`` over a walk, keyed by relative path, from the walk's stats."""
    fmt = count if count and counts.cache_key(count) else None
    results: dict[str, FileDigest | FtManifestError] = {}
    jobs: list[_Job] = []
    top = walked.root.rstrip("/")
    for rel, path, st in walked.entries:
        if stat.S_ISREG(st.st_mode):
            jobs.append(_Job(path, f"{top}/{rel}", st, fmt))  # type: ignore[arg-type]
        else:
            results[rel] = _not_regular(Path(path), st.st_mode)
    own_cache = use_cache and cache is None
    active = (StatCache() if cache is None else cache) if use_cache else None
    by_path: dict[Any, FileDigest | FtManifestError] = {}
    try:
        _hash_jobs(jobs, by_path, active, progress, workers, settle, prefix=f"{top}/")
    finally:
        if active is not None:
            active.close() if own_cache else active.flush()
    rel_of = {path: rel for rel, path, _ in walked.entries}
    for path, result in by_path.items():
        results[rel_of[path]] = result
    return results
