"""What every SQLite cache of ftmanifest shares: a private folder and a WAL connection.

Layer: file access (creates a folder and opens a database).  The stat cache (digests by
stat key) and the scan cache (findings by digest) both trust what they read
back, so whoever can write their folder could make ``verify`` accept a tampered
file or ``scan`` report one as clean: the folder must be the user's own and not
writable by anyone else, and the database file is created 0600.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path


def prepare_private_dir(directory: Path) -> None:
    """Create ``directory`` (0700); refuse one another user owns or can write."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = directory.stat()
    getuid = getattr(os, "getuid", None)
    if getuid is not None and (st.st_uid != getuid() or st.st_mode & 0o022):
        raise PermissionError(
            f"cache directory {directory} is writable by another user "
            f"(mode {stat.filemode(st.st_mode)}, owner uid {st.st_uid})"
        )


def open_store(
    path: Path, schemas: tuple[str, ...], *, timeout: float, threads: bool = False
) -> sqlite3.Connection:
    """A WAL-mode connection to ``path`` (created 0600) with ``schemas`` applied.

    Autocommit (``isolation_level=None``): callers batch writes in their own
    ``BEGIN IMMEDIATE`` transactions.  ``threads``: the caller guards the
    connection with its own lock and shares it across threads.
    """
    prepare_private_dir(path.parent)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(
        str(path), timeout=timeout, isolation_level=None, check_same_thread=not threads
    )
    try:
        _wal(conn, timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        for schema in schemas:
            conn.execute(schema)
    except BaseException:
        conn.close()
        raise
    return conn


def _wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch to WAL, waiting for a process that is switching the same new file.

    SQLite answers "database is locked" at once, without its busy timeout,
    when two connections convert a fresh file together (two ranks of a
    torchrun job starting on one host): retry until ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
