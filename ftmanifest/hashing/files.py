"""Digests of many files: the stat cache first, then every other file read
in parallel (``hash_file``, ``hash_files``, ``from_cache``).

Layer: file access (reads files).  Paths in, a ``FileDigest`` or an error per
path out, in input order; ``settle`` waits out the racy window once so the
next run costs a stat (see ``ftmanifest.hashing``).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from ftmanifest import counts, held, statcache
from ftmanifest.errors import FtManifestError
from ftmanifest.hashing.cpus import _cpus, default_workers
from ftmanifest.hashing.digests import (
    ALGORITHM,
    CountSpec,
    FileDigest,
    StrPath,
    _not_regular,
    _os_error,
)
from ftmanifest.hashing.read import (
    SMALL_FILE,
    _count_after,
    _hash_one,
    _Hashed,
    _Job,
    _kind,
    _Outcome,
    _Stat,
)
from ftmanifest.progress import ProgressSink
from ftmanifest.statcache import StatCache, StatKey, is_racy


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
    """Hash the files that are not racy; return the racy ones once they no longer are.
    Racy files not worth the wait (``statcache.worth_settling``) are returned at once."""
    now, window = time.time_ns(), statcache.RACY_NS
    racy = [job for job in todo if _changed_at(job.st) >= now - window]
    if not statcache.worth_settling(len(racy), sum(job.st.st_size for job in racy)):
        return todo
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
