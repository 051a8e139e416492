"""One process's walk of a folder: ``Walked``, what a walk found, packed.

Layer: file access (lists folders, reads small files).  Each folder's entries
sorted as the tree digest orders them, symlinks judged against the boundary,
every entry's stat packed as ``KEY``; ``_walk_read`` also reads each small
regular file as it comes (``ReadAhead``).
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from ftmanifest import counts, statcache
from ftmanifest.errors import FtManifestError, InputError, InputNotFoundError
from ftmanifest.hashing.digests import SymlinkEscapeError, _check_relpath, _os_error
from ftmanifest.hashing.read import _OPEN_FLAGS, SMALL_FILE

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


class _Out:
    __slots__ = ("names", "keys", "special", "count")

    def __init__(self) -> None:
        self.names, self.keys = bytearray(), bytearray()
        self.special: dict[int, int] = {}
        self.count = 0


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
