"""Walking a tree: ``walk_tree`` and ``list_tree``, the folders shared out to
forked workers past ``READ_AHEAD_MIN`` entries.

Layer: file access (lists folders, reads small files).  The walk is cut into
folders in path order (``_plan``); each worker walks (and with ``read=``, reads)
its folders whole with ``listing``'s walk, and the pieces are joined in order.
"""

from __future__ import annotations

import os
import stat
import struct
import sys
from array import array
from pathlib import Path
from typing import TypeAlias

from ftmanifest.errors import FtManifestError, InputError, InputNotFoundError
from ftmanifest.hashing.cpus import _cpus, _daemonic, default_workers
from ftmanifest.hashing.digests import StrPath
from ftmanifest.hashing.listing import (
    KEY,
    Ahead,
    Walked,
    _enter,
    _listing,
    _Out,
    _ReadOut,
    _walk,
    _walk_read,
)


def list_tree(root: StrPath, *, symlink_root: StrPath | None = None) -> dict[str, Path]:
    """Everything but folders under ``root`` by '/'-separated relative path (see module doc)."""
    return {rel: Path(p) for rel, p in walk_tree(root, symlink_root=symlink_root).entries}


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


READ_AHEAD_MIN = 4096  # entries walked here before workers take the rest
_SPLIT = 16  # folders per worker wanted before the walk is shared out
_READING: tuple[str, Ahead | None] | None = None  # what forked walkers read: the boundary, the ask


def _read_ahead_here() -> bool:
    """Worker processes walk and read: on Linux (fork), with two CPUs or more.  While
    files are held open (``held``), the first ones it has room for are read again
    in this process by the hash, which keeps them (``_hash_walked``)."""
    return sys.platform == "linux" and _cpus() > 1 and not _daemonic()


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
