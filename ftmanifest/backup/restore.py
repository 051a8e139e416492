"""``ftmanifest restore``: into a staging folder, renamed into place only when all is proven.

Layer: edge (writes the restored files).

The staging folder is made next to DEST (same file system, so the final
rename is atomic) with mode 0700; files are created there with O_EXCL and
O_NOFOLLOW, mode 0600, under folders this code made itself, so no member can
reach outside it.  Runs of zero bytes are skipped with a seek, so a sparse
file stays sparse.  Only after age authenticated the last chunk, every
member matched the signed index and every digest matched are the index's
modes and times applied and the folder renamed to DEST.  On any error the
staging folder is removed: DEST is never touched.  An existing DEST is
replaced only with ``force`` (moved aside, replaced, then deleted).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.backup.errors import DestinationExistsError
from ftmanifest.backup.index import Entry
from ftmanifest.backup.meta import Meta
from ftmanifest.backup.unpack import Read, read_archive

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0)
_ZERO = memoryview(bytes(1 << 20))


class _Writer:
    """One thread that writes what the reader hands it, in order, so writing
    overlaps reading and hashing (both release the GIL).  At most ``DEPTH``
    chunks wait; the first error is raised on the next call."""

    DEPTH = 32

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(1, thread_name_prefix="ftmanifest-restore")
        self.pending: deque[Future[None]] = deque()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        self.pending.append(self.pool.submit(fn, *args))
        while len(self.pending) > self.DEPTH or (self.pending and self.pending[0].done()):
            self.pending.popleft().result()

    def drain(self) -> None:
        while self.pending:
            self.pending.popleft().result()

    def shutdown(self) -> None:
        for f in self.pending:
            f.cancel()
        self.pool.shutdown(wait=True)
        self.pending.clear()


class _SparseFile:
    def __init__(self, fd: int, size: int, writer: _Writer) -> None:
        self.fd = fd
        self.size = size
        self.hole = False
        self.writer = writer

    def write(self, chunk: bytes) -> None:
        self.writer.submit(self._write, chunk)

    def _write(self, chunk: bytes) -> None:
        if len(chunk) >= 4096 and chunk == _ZERO[: len(chunk)]:
            os.lseek(self.fd, len(chunk), os.SEEK_CUR)
            self.hole = True
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        self.writer.submit(self._close)

    def _close(self) -> None:
        try:
            if self.hole:
                os.ftruncate(self.fd, self.size)
            os.fsync(self.fd)
        finally:
            os.close(self.fd)


class _Staging:
    """The sink ``read_archive`` writes into."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: set[str] = set()
        self.writer = _Writer()

    def _parent(self, path: str) -> None:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            rel = "/".join(parts[:i])
            if rel not in self.made:
                os.mkdir(self.root / rel, 0o700)  # fails if anything is there
                self.made.add(rel)

    def folder(self, entry: Entry) -> None:
        self._parent(entry.path)
        if entry.path not in self.made:
            os.mkdir(self.root / entry.path, 0o700)
            self.made.add(entry.path)

    def open(self, entry: Entry) -> _SparseFile:
        self._parent(entry.path)
        self.writer.drain()  # a file's folder and its earlier files are on disk
        return _SparseFile(os.open(self.root / entry.path, _FLAGS, 0o600), entry.size, self.writer)


@dataclass(frozen=True)
class Restored:
    dest: Path
    read: Read
    replaced: bool


def restore(
    archive: Path,
    meta: Meta,
    identities: Sequence[Any],
    dest: Path,
    *,
    trust: Any,
    force: bool = False,
    progress: Any = None,
) -> Restored:
    """Restore the verified backup into new folder ``dest``."""
    from ftmanifest.fsutil import fsync_dir, write_error

    dest = Path(os.path.abspath(dest))
    existed = os.path.lexists(dest)
    if existed and not force:
        raise DestinationExistsError(
            "the destination exists; restore never overwrites without --force",
            path=str(dest),
            expected="a path that does not exist yet",
            observed="it exists",
            hint="pick a new --to folder, or pass --force to replace it",
        )
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(dest.parent).free
    except OSError as exc:
        raise write_error(exc, dest) from None
    if free < meta.bytes:
        from ftmanifest.backup.errors import BackupInputError

        raise BackupInputError(
            "not enough free space to restore the backup",
            path=str(dest.parent),
            expected=f"at least {meta.bytes} bytes free (the backup's files)",
            observed=f"{free} bytes free",
            hint="free space or restore to another file system; nothing was written",
        )
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.restore-", dir=dest.parent))
    except OSError as exc:
        raise write_error(exc, dest) from None
    try:
        sink = _Staging(staging)
        try:
            done = read_archive(
                archive, meta, identities, trust=trust, sink=sink, progress=progress
            )
            sink.writer.drain()
        finally:
            sink.writer.shutdown()
        _finish(staging, done.entries)
        if existed:
            aside = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
            os.rename(dest, aside / "old")
            os.rename(staging, dest)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.rename(staging, dest)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError) and not hasattr(exc, "hint"):
            raise write_error(exc, dest) from None
        raise
    fsync_dir(dest.parent)
    return Restored(dest, done, existed)


def _finish(root: Path, entries: Sequence[Entry]) -> None:
    """Index modes and times: files first, then folders deepest first (a
    read-only folder must be filled before its mode is set)."""
    for e in entries:
        if e.type == "file":
            p = root / e.path
            os.chmod(p, e.mode, follow_symlinks=False)
            os.utime(p, (e.mtime, e.mtime), follow_symlinks=False)
    for e in sorted((e for e in entries if e.type == "dir"), key=lambda e: -e.path.count("/")):
        os.chmod(root / e.path, e.mode, follow_symlinks=False)
    os.chmod(root, 0o700)
