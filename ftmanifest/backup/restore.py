"""``ftmanifest restore``: into a staging folder, renamed into place only when all is proven.

Layer: judging rooms - edge (writes the restored files).

DEST's parent is opened once; everything after goes through descriptors
(``dirfd``): the staging folder is made in it (same file system, so the
final rename is atomic) with mode 0700, folders below from their parent's
descriptor, files with O_EXCL and O_NOFOLLOW, mode 0600, under folders this
code made itself, so no member can reach outside it and no path is limited
by PATH_MAX.  Runs of zero bytes are skipped with a seek, so a sparse file
stays sparse.  Files of 1 MiB and more are written with O_DIRECT where the
file system takes it (from aligned buffers, no page-cache copy), the others
buffered; every one is durable (fsync, or one syncfs for the small ones)
before the folder is renamed.  A file's mode and time are set through its
descriptor as it closes; only after age authenticated the last chunk, every member matched
the signed index and every digest matched are the folders' modes applied
and the folder renamed to DEST, and only if the path to DEST still leads to
the folder held open.  On any error the staging folder is removed: DEST is
never touched.  An existing DEST is replaced only with ``force`` (moved
aside, replaced, then deleted); a DEST that holds the backup, or lies in
its folder, is refused.  A staging folder left by a restore that was killed
is removed by the next restore of that DEST (our name, our user, not locked
by a restore still running).
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.backup.destination import (
    STAGING,
    check_space,
    exists,
    forget_staging,
    new_folder,
    note_staging,
    refuse_moved,
    refuse_overlap,
    remove_quietly,
    remove_stale_staging,
    replace,
)
from ftmanifest.backup.dirfd import Folders, open_dir
from ftmanifest.backup.errors import DestinationExistsError
from ftmanifest.backup.index import Entry
from ftmanifest.backup.meta import Meta
from ftmanifest.backup.pipe import Writeback
from ftmanifest.backup.unpack import Read, read_archive
from ftmanifest.fsutil import write_error

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0)
_ZERO = memoryview(bytes(1 << 20))


def _all_zero(chunk: bytes | memoryview) -> bool:
    """A run of zeros worth a hole (a block or more): skipped with a seek."""
    return len(chunk) >= 4096 and chunk == _ZERO[: len(chunk)]


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


class _Syncs:
    """fsync and close restored files on a few threads, so the disk's waits
    overlap decryption and one journal commit serves several files (a fsync
    per file, one after another, cost about a millisecond each).  At most
    ``DEPTH`` descriptors wait; ``finish`` returns only when every file is
    durable and raises the first error."""

    THREADS = 4
    DEPTH = 64

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(self.THREADS, thread_name_prefix="ftmanifest-fsync")
        self.pending: deque[Future[None]] = deque()

    def submit(self, fd: int) -> None:
        self.pending.append(self.pool.submit(_sync_close, fd))
        while len(self.pending) > self.DEPTH or (self.pending and self.pending[0].done()):
            self.pending.popleft().result()

    def finish(self) -> None:
        try:
            while self.pending:
                self.pending.popleft().result()
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)  # every descriptor handed over is closed
        self.pending.clear()


def _sync_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _SparseFile:
    """A restored file: its chunks written by the writer thread, then its mode and
    time set and its descriptor handed to the fsync threads."""

    def __init__(self, fd: int, entry: Entry, writer: _Writer, syncs: _Syncs) -> None:
        self.fd = fd
        self.entry = entry
        self.hole = False
        self.writer = writer
        self.syncs = syncs
        self.writeback = Writeback(fd)

    def claim(self, n: int) -> memoryview:
        """A fresh buffer for the next ``n`` bytes at most: the writer thread
        keeps it until written (``tarstream.Discard`` says what the calls mean)."""
        self.lent = memoryview(bytearray(n))
        return self.lent

    def commit(self, n: int) -> None:
        self.writer.submit(self._write, self.lent[:n])

    def _write(self, chunk: bytes | memoryview) -> None:
        if _all_zero(chunk):
            os.lseek(self.fd, len(chunk), os.SEEK_CUR)
            self.hole = True
            self.writeback.wrote(len(chunk))
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(self.fd, view) :]
        self.writeback.wrote(len(chunk))

    def close(self) -> None:
        self.writer.submit(self._close)

    def _close(self) -> None:
        try:
            self._finish()
            self.writeback.flush_started()
        except BaseException:
            os.close(self.fd)
            raise
        self.syncs.submit(self.fd)  # fsynced, then closed

    def _finish(self) -> None:
        if self.hole:
            os.ftruncate(self.fd, self.entry.size)
        os.fchmod(self.fd, self.entry.mode)
        os.utime(self.fd, (self.entry.mtime, self.entry.mtime))


_O_DIRECT = getattr(os, "O_DIRECT", 0)  # Linux, FreeBSD; elsewhere every file is buffered
ALIGN = 4096  # O_DIRECT's offsets, lengths and buffers: a multiple of the logical block
BLOCK_BYTES = 1 << 20


class _Blocks:
    """Page-aligned 1 MiB buffers (anonymous maps) handed between the reader and
    the writer thread; ``take`` waits while all are in flight, so memory is bounded."""

    COUNT = 16

    def __init__(self) -> None:
        import mmap
        import queue

        self.free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for _ in range(self.COUNT):
            self.free.put(mmap.mmap(-1, BLOCK_BYTES))

    def take(self) -> Any:
        return self.free.get()

    def give(self, block: Any) -> None:
        self.free.put(block)


class _DirectFile(_SparseFile):
    """A large restored file written with ``O_DIRECT``: its bytes gathered into
    aligned blocks, each written by the writer thread straight from the buffer
    to the disk.  A buffered write copies every byte into the page cache first,
    and on a virtual machine that copy (fresh pages for each file) cost about as
    much CPU as decrypting; the fsync after it still makes the bytes and the
    file's size durable (``_SparseFile._close``: nothing was handed to the
    write-back hints, so they do nothing here).  The last block's unaligned
    tail is written buffered (the flag cleared first), and so is everything
    after a write the file system refuses with EINVAL: the flag is only a way
    to write, never a guarantee."""

    def __init__(self, fd: int, entry: Entry, writer: _Writer, syncs: _Syncs, blocks: _Blocks):
        super().__init__(fd, entry, writer, syncs)
        self.blocks = blocks
        self.block: Any = None
        self.filled = 0
        self.direct = True

    def claim(self, n: int) -> memoryview:
        """The free part of the current aligned block, up to ``n`` bytes: the
        stream reads into it directly."""
        if self.block is None:
            self.block = self.blocks.take()
            self.filled = 0
        return memoryview(self.block)[self.filled : min(BLOCK_BYTES, self.filled + n)]

    def commit(self, n: int) -> None:
        self.filled += n
        if self.filled == BLOCK_BYTES:
            self._hand_over()

    def _hand_over(self) -> None:
        block, self.block = self.block, None
        self.writer.submit(self._write_block, block, self.filled)

    def close(self) -> None:
        if self.block is not None:
            self._hand_over()
        super().close()

    def _write_block(self, block: Any, n: int) -> None:
        try:
            view = memoryview(block)[:n]
            if _all_zero(view):
                os.lseek(self.fd, n, os.SEEK_CUR)
                self.hole = True
                return
            whole = n - n % ALIGN
            if self.direct and whole:
                self._write_direct(view[:whole])
                view = view[whole:]
            if view:
                self._buffered()
                while view:
                    view = view[os.write(self.fd, view) :]
        finally:
            view.release()
            self.blocks.give(block)

    def _write_direct(self, view: memoryview) -> None:
        while view:
            try:
                done = os.write(self.fd, view)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self._buffered()  # the file system takes no direct write here
                done = os.write(self.fd, view)
            view = view[done:]
            if view and done % ALIGN:
                self._buffered()  # a short write left the offset unaligned

    def _buffered(self) -> None:
        if self.direct:
            self.direct = False
            flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
            fcntl.fcntl(self.fd, fcntl.F_SETFL, flags & ~_O_DIRECT)


def _try_direct(fd: int) -> bool:
    """Set ``O_DIRECT`` on ``fd``; False where the file system refuses it (tmpfs,
    some FUSE and network file systems), and the file is written buffered."""
    if not _O_DIRECT:
        return False
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | _O_DIRECT)
    except OSError:
        return False
    return True


class _SmallFile(_SparseFile):
    """A small restored file, written here as its bytes come and closed without its
    own fsync: one ``syncfs`` of the staging folder's file system makes every such
    file durable before the rename (``_Staging.finish``).  A fsync a file cost each
    create a wait for the journal commit it forced (100,000 files: 16 s in ``open``)."""

    scratch: memoryview  # the staging's one buffer: written before the next claim

    def claim(self, n: int) -> memoryview:
        return self.scratch[:n]

    def commit(self, n: int) -> None:
        self._write(self.scratch[:n])

    def close(self) -> None:
        try:
            self._finish()
        finally:
            os.close(self.fd)


SMALL = 1 << 20  # files below this are written inline and made durable by one syncfs


def _find_syncfs() -> Any:
    """libc's ``syncfs(fd)`` (Linux), or None: then every file is fsynced itself."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    return fn


class _Staging:
    """The sink ``read_archive`` writes into, below the staging folder's descriptor."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.folders = Folders(root, made=set())
        self.writer = _Writer()
        self.syncs = _Syncs()
        self.syncfs = _find_syncfs()
        self.unsynced = 0  # small files that wait for the one syncfs
        self.blocks: _Blocks | None = None  # made for the first large file
        self.scratch = memoryview(bytearray(SMALL))  # what small files are read into

    def folder(self, entry: Entry) -> None:
        self.folders.reach(entry.path.split("/"))

    def open(self, entry: Entry) -> _SparseFile:
        *above, name = entry.path.split("/")
        where = self.folders.reach(above)  # made here, before the writer is told of it
        fd = os.open(name, _FLAGS, 0o600, dir_fd=where)
        if self.syncfs is not None and entry.size < SMALL:
            self.unsynced += 1
            small = _SmallFile(fd, entry, self.writer, self.syncs)
            small.scratch = self.scratch
            return small
        if entry.size >= SMALL and _try_direct(fd):
            if self.blocks is None:
                self.blocks = _Blocks()
            return _DirectFile(fd, entry, self.writer, self.syncs, self.blocks)
        return _SparseFile(fd, entry, self.writer, self.syncs)

    def finish(self) -> None:
        """Every file written and durable: the writer drained, the fsyncs done, and
        one syncfs for the small files."""
        self.writer.drain()
        self.syncs.finish()
        if self.unsynced:
            import ctypes

            if self.syncfs(self.root) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"syncfs: {os.strerror(err)}")


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
    dest = Path(os.path.abspath(dest))
    refuse_overlap(dest, archive)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        parent_path = os.path.realpath(dest.parent)
        parent = open_dir(parent_path)
    except OSError as exc:
        raise write_error(exc, dest) from None
    try:
        existed = exists(parent, dest.name)
        if existed and not force:
            raise DestinationExistsError(
                "the destination exists; restore never overwrites without --force",
                path=str(dest),
                expected="a path that does not exist yet",
                observed="it exists",
                hint="pick a new --out folder, or pass --force to replace it",
            )
        check_space(parent, dest, meta.bytes)
        remove_stale_staging(parent, dest.name)
        staging = new_folder(parent, STAGING.format(name=dest.name))
        record = note_staging(os.path.join(parent_path, staging), archive.parent)
        root = -1
        try:
            root = open_dir(staging, parent)
            fcntl.flock(root, fcntl.LOCK_EX | fcntl.LOCK_NB)  # not stale while we run
            done = _fill(root, archive, meta, identities, trust, progress)
            refuse_moved(parent, dest)
            if existed:
                replace(parent, staging, dest.name)
            else:
                os.rename(staging, dest.name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException as exc:
            remove_quietly(parent, staging)
            if isinstance(exc, OSError) and not hasattr(exc, "hint"):
                raise write_error(exc, dest) from None
            raise
        finally:
            if root >= 0:
                os.close(root)
            forget_staging(record)
        os.fsync(parent)
    except OSError as exc:
        if hasattr(exc, "hint"):
            raise
        raise write_error(exc, dest) from None
    finally:
        os.close(parent)
    return Restored(dest, done, existed)


def _fill(
    root: int, archive: Path, meta: Meta, identities: Sequence[Any], trust: Any, progress: Any
) -> Read:
    """Decrypt, judge and write the backup into the staging folder ``root``."""
    os.fchmod(root, 0o700)
    sink = _Staging(root)
    try:
        done = read_archive(archive, meta, identities, trust=trust, sink=sink, progress=progress)
        sink.finish()  # every file durable before the folder is renamed into place
    finally:
        sink.writer.shutdown()
        sink.syncs.shutdown()
    _finish(sink.folders, done.entries)
    return done


def _finish(folders: Folders, entries: Sequence[Entry]) -> None:
    """The index's folder modes, deepest first (a read-only folder must be
    filled before its mode is set): in reverse byte order every folder comes
    after all that it holds.  Each is set from its parent, never entered."""
    dirs = sorted((e for e in entries if e.type == "dir"), key=lambda e: e.path.encode("utf-8"))
    for e in reversed(dirs):
        *above, name = e.path.split("/")
        os.chmod(name, e.mode, dir_fd=folders.reach(above))
    folders.close()
