"""Probe: git blob ids of work-tree files, computed by ftmanifest, kept in the stat cache.

Layer: probes and runtime.  A blob id is ``sha1(b"blob <size>\\0" + bytes)``
(sha256 in a sha256 repository) over the file's raw bytes, no filter applied
(a clean filter or ``text``/``eol`` attribute would show git other bytes), a
symlink's over its link text.  Ids of regular files are kept in the stat
cache under ``gitblob-sha1`` (``gitblob-sha256``), keyed like every digest
there by path, device, inode, size, mtime and ctime: an unchanged repository
re-checks with one ``lstat`` per file, and an edit whose mtime was put back
still changes ctime.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time
from collections.abc import Iterable

from ftmanifest.statcache import StatCache, StatKey
from ftmanifest.untrusted import kind_of

REGULAR, EXECUTABLE, SYMLINK = "100644", "100755", "120000"
_CHUNK = 1 << 20


def blob_id(data: bytes, object_format: str = "sha1") -> str:
    """The git object id of a blob holding ``data``."""
    h = hashlib.new(object_format, b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def format_of(commit: str) -> str:
    """The object format a commit id is written in (``sha1`` or ``sha256``)."""
    return "sha256" if len(commit) == 64 else "sha1"


def worktree_blob_id(path: str | os.PathLike[str], object_format: str = "sha1") -> str:
    """The git blob id of the file at ``path`` as it is now: its raw bytes (no
    filter), a symlink's link text.  Raises ``OSError`` (``FileNotFoundError``
    when absent) and ``ValueError`` for a folder, FIFO or device."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return blob_id(os.fsencode(os.readlink(path)), object_format)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{os.fspath(path)} is {kind_of(st.st_mode)}")
    return _read_blob_id(os.fspath(path), object_format)[0]


def observe_blobs(
    root: str, entries: Iterable[str], object_format: str, cache: StatCache | None
) -> dict[str, tuple[str, str | None]]:
    """(mode as git would record it, blob id) of each path in the work tree, or
    (what is there in words, None): ``absent``, ``a folder``, ``unreadable: ...``.
    ``entries`` are '/'-separated paths below ``root``."""
    seen: dict[str, tuple[str, str | None]] = {}
    regular: list[tuple[str, str, os.stat_result]] = []
    for rel in entries:
        full = f"{root}/{rel}"  # git paths are "/"-separated and relative
        try:
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                seen[rel] = (SYMLINK, blob_id(os.fsencode(os.readlink(full)), object_format))
            elif stat.S_ISREG(st.st_mode):
                regular.append((rel, full, st))
            else:
                seen[rel] = (kind_of(st.st_mode), None)
        except FileNotFoundError:
            seen[rel] = ("absent", None)
        except NotADirectoryError:
            seen[rel] = ("absent", None)  # a folder on its way is now a file
        except OSError as exc:
            seen[rel] = (f"unreadable: {exc.strerror or exc}", None)
    algo = f"gitblob-{object_format}"
    keyed = [(full, StatKey.of(st)) for _rel, full, st in regular if _storable(full)]
    known = cache.lookup_many(keyed, algo) if cache is not None else {}
    for rel, full, st in regular:
        mode = EXECUTABLE if st.st_mode & stat.S_IXUSR else REGULAR
        if full in known:
            seen[rel] = (mode, known[full])
            continue
        try:
            started = time.time_ns()
            oid, key = _read_blob_id(full, object_format)
        except OSError as exc:
            seen[rel] = (f"unreadable: {exc.strerror or exc}", None)
            continue
        except ValueError as exc:  # swapped for a FIFO or a folder after the lstat
            seen[rel] = (str(exc).rpartition(" is ")[2], None)
            continue
        seen[rel] = (mode, oid)
        if cache is not None and key is not None and _storable(full):
            cache.put(full, algo, key, oid, hashed_at_ns=started)
    return seen


def _storable(path: str) -> bool:
    """The stat cache stores UTF-8 text: a name with undecodable bytes is hashed every time."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read_blob_id(path: str, object_format: str) -> tuple[str, StatKey | None]:
    """The blob id of regular file ``path`` and the stat key it was read under (None
    when it changed while read: the id is right for the bytes read, not cacheable).

    The header needs the size first: it is the size ``fstat`` gives before the
    read, and a file that grew or shrank meanwhile is read again (then refused).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _attempt in range(2):
        fd = os.open(path, flags)
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise ValueError(f"{path} is {kind_of(before.st_mode)}")
            h = hashlib.new(object_format, b"blob %d\0" % before.st_size)
            total = 0
            while chunk := os.read(fd, _CHUNK):
                h.update(chunk)
                total += len(chunk)
            after = os.fstat(fd)
        finally:
            os.close(fd)
        if total == before.st_size:
            key = StatKey.of(before)
            return h.hexdigest(), key if StatKey.of(after) == key else None
    raise OSError(errno.EAGAIN, "changed while it was read", path)
