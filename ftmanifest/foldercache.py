"""Folder cache: a hashed folder's every file, stat key and digest, in one compact file.

Layer: file access (reads and writes ``<cache>/trees/`` and ``<cache>/folders/``).
The stat cache (``ftmanifest.statcache``) keeps a row per file; for a folder of
a million shards that is 360 bytes and some 20 µs a file.  ``hash_tree``
keeps a folder's state here instead, as four arrays in the walk's order:

- ``names``: every relative path in UTF-8, each followed by NUL;
- ``keys``: each file's stat key, ``hashing.KEY`` (device, inode, size,
  mtime_ns, ctime_ns) -- a racy file's ctime is stored as -1, so it never matches;
- ``counts``: each file's record count in ``kind``, or -1 (int64);
- ``digests``: each file's sha256, 32 bytes.

A re-verify of an unchanged folder compares the walk's ``names`` and ``keys``
with the stored ones as two byte strings, and takes the tree digest stored with
them: no per-file Python work past the walk.  The same trust as the stat cache:
the user's own cache, never the folder being checked.

A state is ``trees/<tree hex>.<root key>.tree`` (mode 0600), and
``folders/<root key>`` names the state of that folder (the root key is a hash of
the folder's absolute path and symlink boundary).  A replaced state is kept, so
it is also the pinned file list of its digest (``treelist.read`` finds it by
digest, and trusts it only when its records hash to that digest).  The ``KEEP``
states used last are kept.  Anything unreadable, truncated or inconsistent is a
miss; nothing fails for want of this cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"ftmanifest-folder-cache-v1\n"
SUFFIX = ".tree"
KEEP = 256  # states kept, those used last: a state per data folder and per pinned list
KEEP_POINTERS = 4096
MAX_BYTES = 4 << 30
KEY_SIZE = 40  # hashing.KEY.size
DIGEST_SIZE = 32
COUNT_SIZE = 8


@dataclass(frozen=True)
class State:
    """One folder as it was hashed (see the module doc)."""

    root: str
    boundary: str
    digest: str  # the tree digest, "sha256:<hex>"
    kind: str | None  # the record kind ``counts`` are in, or None
    count: int  # files
    names: bytes
    keys: bytes
    counts: bytes
    digests: bytes
    file: Path | None = None  # where it was read from or written to


def root_key(root: str, boundary: str) -> str:
    seed = f"{root}\0{boundary}".encode("utf-8", "surrogateescape")
    return hashlib.sha256(seed).hexdigest()[:32]


def _tree_hex(digest: str) -> str | None:
    algo, _, hexpart = digest.partition(":")
    ok = algo == "sha256" and len(hexpart) == 64 and all(c in "0123456789abcdef" for c in hexpart)
    return hexpart if ok else None


def load(directory: Path, root: str, boundary: str) -> State | None:
    """The state last stored for the folder ``root``, or None."""
    key = root_key(root, boundary)
    try:
        name = _read_small(directory / "folders" / key)
    except OSError:
        return None
    if name is None or not name.endswith(f".{key}{SUFFIX}") or "/" in name:
        return None
    state = read(directory / "trees" / name)
    if state is None or state.root != root or state.boundary != boundary:
        return None
    return state


def known(directory: Path, root: str, boundary: str) -> bool:
    """Whether a state was stored for the folder ``root`` (not whether it still reads)."""
    return os.path.lexists(directory / "folders" / root_key(root, boundary))


def find(directory: Path, digest: str) -> list[Path]:
    """Every stored state whose tree digest is ``digest`` (unverified: see ``read``)."""
    hexpart = _tree_hex(digest)
    if hexpart is None:
        return []
    where = directory / "trees"
    try:
        names = os.listdir(where)
    except OSError:
        return []
    return [where / n for n in names if n.startswith(hexpart + ".") and n.endswith(SUFFIX)]


def read(path: Path) -> State | None:
    """The state in ``path``, or None when it is not one (see the module doc)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
        state = _parse(data, path)
        if state is not None:
            os.utime(fd)  # used: pruned last
        return state
    except (OSError, ValueError, zlib.error, UnicodeDecodeError, KeyError, TypeError):
        return None
    finally:
        os.close(fd)


def _parse(data: bytes, path: Path) -> State | None:
    if not data.startswith(MAGIC):
        return None
    end = data.index(b"\n", len(MAGIC))
    head = json.loads(data[len(MAGIC) : end])
    n = int(head["count"])
    sizes = [int(s) for s in head["sizes"]]
    if len(sizes) != 4 or any(s < 0 for s in sizes) or n < 0:
        return None
    body, at, parts = data[end + 1 :], 0, []
    for size in sizes:
        parts.append(body[at : at + size])
        at += size
    if at != len(body):
        return None
    names, keys, counts = (zlib.decompress(p) for p in parts[:3])
    digests = parts[3]
    if zlib.crc32(digests) != int(head["crc"]):
        return None
    if len(keys) != KEY_SIZE * n or len(counts) != COUNT_SIZE * n:
        return None
    if len(digests) != DIGEST_SIZE * n or names.count(0) != n or (n and names[-1] != 0):
        return None
    kind = head["kind"]
    if not isinstance(head["root"], str) or not isinstance(head["boundary"], str):
        return None
    if _tree_hex(str(head["digest"])) is None or not (kind is None or isinstance(kind, str)):
        return None
    return State(
        head["root"], head["boundary"], head["digest"], kind, n, names, keys, counts, digests, path
    )


def store(directory: Path, state: State) -> Path | None:
    """Write ``state`` and make it its folder's; None when it cannot be written."""
    hexpart = _tree_hex(state.digest)
    if hexpart is None:
        return None
    key = root_key(state.root, state.boundary)
    trees, folders = directory / "trees", directory / "folders"
    target = trees / f"{hexpart}.{key}{SUFFIX}"
    try:
        trees.mkdir(mode=0o700, parents=True, exist_ok=True)
        folders.mkdir(mode=0o700, parents=True, exist_ok=True)
        parts = [zlib.compress(b, 1) for b in (state.names, state.keys, state.counts)]
        parts.append(state.digests)
        head = {
            "root": state.root,
            "boundary": state.boundary,
            "digest": state.digest,
            "kind": state.kind,
            "count": state.count,
            "sizes": [len(p) for p in parts],
            "crc": zlib.crc32(state.digests),
        }
        line = json.dumps(head, ensure_ascii=True).encode("ascii")
        _atomic(target, [MAGIC, line, b"\n", *parts])
        _atomic(folders / key, [target.name.encode("ascii")])
        _prune(trees, lambda n: n.endswith(SUFFIX), KEEP)
        _prune(folders, lambda n: len(n) == 32 and "." not in n, KEEP_POINTERS)
    except (OSError, ValueError):
        return None
    return target


def _read_small(path: Path) -> str | None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, 4096).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def _atomic(target: Path, chunks: list[bytes]) -> None:
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(name, target)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def _prune(where: Path, ours: Callable[[str], bool], keep: int) -> None:
    """Keep the ``keep`` files used last of those ``ours`` names."""
    names = [n for n in os.listdir(where) if ours(n)]
    if len(names) <= keep:
        return
    aged = []
    for n in names:
        try:
            aged.append((os.stat(where / n).st_mtime_ns, n))
        except OSError:
            continue
    aged.sort()
    for _, n in aged[: len(aged) - keep]:
        (where / n).unlink(missing_ok=True)
