"""Stat cache: remember a file's digest while its stat says it is unchanged.

Layer: file access (SQLite in the user cache directory, outside any repository).
Used by ``ftmanifest.hashing`` so that re-verifying unchanged files costs one
``stat`` and one indexed lookup instead of a full read.

An entry is keyed by the absolute path and algorithm and is trusted only
while the file's device, inode, size, mtime_ns *and* ctime_ns are the same
as when it was hashed.  ctime is in the key because ``touch -d`` can put an
edited file's mtime back but nothing short of changing the clock resets
ctime.  Files modified within ``RACY_NS`` of the moment they were hashed are
not stored ("racy" entries, as in git): a later write inside the same
timestamp tick would otherwise leave the stat unchanged.  Storing them with a
flag would not help: on the next run such an entry could only be trusted
after reading the file again, which is what a miss costs anyway.  The caller
that wants a fresh file cached waits until it is no longer racy before
reading it (``hash_files(settle=True)``, used by ``lock``), but only when
reading the racy files again later would cost more than the wait
(``worth_settling``): a few fresh files of a small project are read again
by the next verify in milliseconds, and ``lock`` returns at once.

Record counts live in a second table, keyed by content digest and counter
(``records.cache_key``), not by stat: a count computed in the same read as
the digest belongs to those bytes whatever happens to the file later, so it
can never be stale.  The table was added to the v1 file: older versions
neither read nor write it.

Safety: one connection per ``StatCache``, guarded by a lock so threads may
share it; WAL journal, busy timeout and short batched transactions so
several processes can use one cache.  Any SQLite failure (locked, corrupt,
unwritable) logs one warning and turns the cache off for the rest of the
run: a broken cache only costs speed, never correctness.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from ftmanifest.sqlite_store import open_store

log = logging.getLogger(__name__)

ENV_CACHE_DIR = "FTMANIFEST_CACHE_DIR"
DB_NAME = "statcache-v1.sqlite3"
RACY_NS = 2_000_000_000  # covers coarse timestamps (FAT: 2 s) and clock ticks
# Settling waits up to RACY_NS; below these the next run reads the racy files again in
# well under that (about 0.25 s: 256 MiB at 1 GB/s, or 2,500 opens of small files).
SETTLE_MIN_BYTES = 256 << 20
SETTLE_MIN_FILES = 2_500
FLUSH_ENTRIES = 10_000  # a transaction a batch: 1,000 cost 20 µs a file at 100,000 files
FLUSH_SECONDS = 5.0
_BATCH = 500  # paths per SELECT, well under SQLite's variable limit
_warned: set[str] = set()  # cache files already warned about in this process

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    path TEXT NOT NULL,
    algo TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (path, algo)
) WITHOUT ROWID
"""
_RECORDS_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    digest TEXT NOT NULL,
    kind TEXT NOT NULL,
    records INTEGER NOT NULL,
    PRIMARY KEY (digest, kind)
) WITHOUT ROWID
"""


def cache_dir() -> Path:
    """``$FTMANIFEST_CACHE_DIR``, else ``$XDG_CACHE_HOME/ftmanifest``, else ~/.cache/ftmanifest."""
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec says relative values are invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "ftmanifest"


def is_racy(key: StatKey, hashed_at_ns: int) -> bool:
    """Changed so close to ``hashed_at_ns`` that a same-tick rewrite could hide.

    ctime counts as well as mtime: ``write`` then ``utime`` back, hash, and the
    same again within one timestamp tick leaves mtime old and ctime unchanged.
    """
    return max(key.mtime_ns, key.ctime_ns) >= hashed_at_ns - RACY_NS


def worth_settling(files: int, nbytes: int) -> bool:
    """Whether racy files (``files`` of them, ``nbytes`` in all) are worth waiting for
    (up to ``RACY_NS``) so that they can be cached: reading them again would cost more."""
    return files > 0 and (nbytes >= SETTLE_MIN_BYTES or files >= SETTLE_MIN_FILES)


def _i64(value: int) -> int:
    """SQLite integers are signed 64-bit; st_dev/st_ino are unsigned."""
    return value - (1 << 64) if value >= 1 << 63 else value


class StatKey(NamedTuple):
    """What must be unchanged for a cached digest to be trusted."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> StatKey:
        return cls(_i64(st.st_dev), _i64(st.st_ino), st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class StatCache:
    """Digests by (path, algorithm, stat key), in one SQLite file.

    ``hits``, ``misses``, ``stored`` and ``racy`` count what happened to
    digests, ``record_hits`` and ``records_stored`` to record counts, for
    tests and benchmarks.  ``enabled`` turns false after the first failure.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, *, timeout: float = 5.0):
        home_error: Exception | None = None
        try:
            self.directory = Path(directory) if directory is not None else cache_dir()
        except (RuntimeError, KeyError) as exc:  # no home directory to put it in
            self.directory, home_error = Path("~/.cache/ftmanifest"), exc
        self.path = self.directory / DB_NAME
        self.hits = 0
        self.misses = 0
        self.stored = 0
        self.racy = 0
        self.record_hits = 0
        self.records_stored = 0
        self._lock = threading.Lock()
        self._pending: list[tuple[object, ...]] = []
        self._pending_records: list[tuple[str, str, int]] = []
        self._last_flush = time.monotonic()
        self._conn: sqlite3.Connection | None = None
        try:
            if home_error is not None:
                raise OSError(f"no cache directory: {home_error}")
            self._conn = open_store(
                self.path, (_SCHEMA, _RECORDS_SCHEMA), timeout=timeout, threads=True
            )
        except (OSError, sqlite3.Error) as exc:
            self._disable(exc)

    @property
    def enabled(self) -> bool:
        return self._conn is not None

    def _disable(self, exc: BaseException) -> None:
        """Warn (once per process and cache file) and carry on without a cache."""
        if str(self.path) not in _warned:
            _warned.add(str(self.path))
            log.warning(
                "ftmanifest: stat cache %s unusable (%s); hashing without it. "
                "Remove the file to rebuild it, or set %s.",
                self.path,
                exc,
                ENV_CACHE_DIR,
            )
        conn, self._conn = self._conn, None
        self._pending.clear()
        self._pending_records.clear()
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def lookup(self, path: str, algo: str, key: StatKey) -> str | None:
        """The cached digest when ``key`` matches what was stored, else None."""
        return self.lookup_many([(path, key)], algo).get(path)

    def lookup_many(self, items: Sequence[tuple[str, StatKey]], algo: str) -> dict[str, str]:
        """Digests of the (path, key) pairs whose key matches, by path; few queries."""
        found: dict[str, str] = {}
        with self._lock:
            for start in range(0, len(items) if self._conn is not None else 0, _BATCH):
                batch = items[start : start + _BATCH]
                marks = ",".join("?" * len(batch))
                try:
                    assert self._conn is not None
                    rows = self._conn.execute(
                        "SELECT path, dev, ino, size, mtime_ns, ctime_ns, digest FROM entries"
                        f" WHERE algo = ? AND path IN ({marks})",
                        (algo, *(path for path, _ in batch)),
                    ).fetchall()
                except sqlite3.Error as exc:
                    self._disable(exc)
                    found.clear()
                    break
                stored = {row[0]: row for row in rows}
                for path, key in batch:
                    row = stored.get(path)
                    if row is not None and StatKey(*row[1:6]) == key:
                        found[path] = str(row[6])
            self.hits += len(found)
            self.misses += len(items) - len(found)
        return found

    def lookup_records(self, items: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """Stored counts of the (digest, kind) pairs that have one; few queries."""
        found: dict[tuple[str, str], int] = {}
        by_kind: dict[str, list[str]] = {}
        for digest, kind in items:
            by_kind.setdefault(kind, []).append(digest)
        with self._lock:
            try:
                for kind, digests in by_kind.items() if self._conn is not None else ():
                    # one kind, digests IN a batch: an index probe each (an OR of
                    # pairs was planned as a scan per batch)
                    for start in range(0, len(digests), _BATCH):
                        batch = digests[start : start + _BATCH]
                        assert self._conn is not None
                        rows = self._conn.execute(
                            "SELECT digest, records FROM records WHERE kind = ?"
                            f" AND digest IN ({','.join('?' * len(batch))})",
                            (kind, *batch),
                        ).fetchall()
                        found.update(((str(d), kind), int(n)) for d, n in rows)
            except sqlite3.Error as exc:
                self._disable(exc)
                found.clear()
            self.record_hits += len(found)
        return found

    def put(self, path: str, algo: str, key: StatKey, digest: str, *, hashed_at_ns: int) -> None:
        """Queue an entry; written in batches.  ``hashed_at_ns``: wall clock before reading."""
        with self._lock:
            if self._conn is None:
                return
            if is_racy(key, hashed_at_ns):
                self.racy += 1
                return
            self._pending.append((path, algo, *key, digest))
            self._maybe_flush_locked()

    def put_records(self, digest: str, kind: str, records: int) -> None:
        """Queue a count for content ``digest``: only ever one computed from those bytes."""
        with self._lock:
            if self._conn is None:
                return
            self._pending_records.append((digest, kind, records))
            self._maybe_flush_locked()

    def _maybe_flush_locked(self) -> None:
        due = time.monotonic() - self._last_flush >= FLUSH_SECONDS
        if len(self._pending) + len(self._pending_records) >= FLUSH_ENTRIES or due:
            self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._last_flush = time.monotonic()
        if self._conn is None or not (self._pending or self._pending_records):
            return
        rows, self._pending = self._pending, []
        counts, self._pending_records = self._pending_records, []
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO entries"
                    " (path, algo, dev, ino, size, mtime_ns, ctime_ns, digest)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._conn.executemany(
                    "INSERT OR REPLACE INTO records (digest, kind, records) VALUES (?, ?, ?)",
                    counts,
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            self._disable(exc)
            return
        self.stored += len(rows)
        self.records_stored += len(counts)

    def close(self) -> None:
        """Write what is queued and close the connection."""
        with self._lock:
            self._flush_locked()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> StatCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
