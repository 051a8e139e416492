"""A tree's digest: ``hash_tree`` over a walk, unchanged files from the folder
cache, the rest read (``TreeFiles`` holds the result as the cache's arrays).

Layer: file access (reads files).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ftmanifest import counts, foldercache, held, statcache
from ftmanifest.errors import FtManifestError
from ftmanifest.hashing.digests import (
    ALGORITHM,
    FileDigest,
    StrPath,
    TreeResult,
    _not_regular,
)
from ftmanifest.hashing.files import _hash_all, _hash_settled
from ftmanifest.hashing.forked import _forkable, _hash_forked
from ftmanifest.hashing.listing import _NEVER, KEY, Walked
from ftmanifest.hashing.read import _Hashed, _Job, _Stat
from ftmanifest.hashing.walk import walk_tree
from ftmanifest.progress import ProgressSink
from ftmanifest.statcache import StatCache


class TreeFiles(Mapping[str, FileDigest]):
    """A hashed tree's files by relative path, in path order, kept as the folder
    cache's arrays (``ftmanifest.foldercache``) and read on demand."""

    def __init__(
        self, names: bytes, keys: bytes, digests: bytes, counts: array[int] | None, count: int
    ) -> None:
        self.names, self.stats, self.digests, self.counts = names, keys, digests, counts
        self.count = count
        self.stored: Path | None = None  # the folder cache's state for these files
        self._index: dict[str, int] | None = None

    def _rels(self) -> list[str]:
        return self.names[:-1].decode("utf-8").split("\0") if self.count else []

    def _at(self, i: int) -> FileDigest:
        size = KEY.unpack_from(self.stats, i * KEY.size)[2]
        n = self.counts[i] if self.counts is not None else -1
        digest = f"{ALGORITHM}:{self.digests[i * 32 : i * 32 + 32].hex()}"
        return FileDigest(digest, size, None if n < 0 else n)

    def __getitem__(self, rel: str) -> FileDigest:
        if self._index is None:
            self._index = {r: i for i, r in enumerate(self._rels())}
        return self._at(self._index[rel])

    def __iter__(self) -> Iterator[str]:
        return iter(self._rels())

    def __len__(self) -> int:
        return self.count

    def items(self) -> Any:  # in order, without the index
        return ((rel, self._at(i)) for i, rel in enumerate(self._rels()))

    def values(self) -> Any:
        return (self._at(i) for i in range(self.count))

    def size(self) -> int:
        """Bytes in all files."""
        sizes: Any = memoryview(self.stats).cast("q")[2::5]
        return sum(sizes)

    def records(self) -> Iterator[bytes]:
        """The tree digest's input (``relpath NUL digest LF`` each), in chunks; joined
        by C loops (zip over the names and the hex split at once), not a Python one."""
        import binascii
        from itertools import chain, repeat

        head = f"\0{ALGORITHM}:".encode("ascii")
        rels = self.names.split(b"\0")
        step = 4096
        for start in range(0, self.count, step):
            end = min(start + step, self.count)
            hexes = binascii.hexlify(self.digests[start * 32 : end * 32], b" ", 32).split(b" ")
            parts = zip(rels[start:end], repeat(head), hexes, repeat(b"\n"))
            yield b"".join(chain.from_iterable(parts))


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
    Unchanged files come from the folder cache (``ftmanifest.foldercache``) in the
    directory of ``cache`` (default: the user's cache), not the stat cache.
    """
    walked = walk_tree(root, symlink_root=symlink_root) if walked is None else walked
    if hasher is None:
        return _hash_walked(walked, use_cache, workers, progress, cache, count, settle)
    listing = {rel: Path(p) for rel, p in walked.entries}
    by_path = hasher(
        listing.values(),
        use_cache=use_cache,
        workers=workers,
        progress=progress,
        cache=cache,
        count=count,
        settle=settle,
    )
    files: dict[str, FileDigest] = {}
    for rel, p in listing.items():
        result = by_path[p]
        if isinstance(result, FtManifestError):
            raise result
        files[rel] = result
    counted = [fd.records for fd in files.values()]
    total = sum(n for n in counted if n is not None) if count and None not in counted else None
    h = hashlib.sha256()  # tree_digest over names the walk checked, in the walk's order
    for rel, fd in files.items():
        h.update(rel.encode("utf-8") + b"\0" + fd.digest.encode("ascii") + b"\n")
    size = sum(fd.size for fd in files.values())
    return TreeResult(files, f"sha256:{h.hexdigest()}", total, size)


def _hash_walked(
    walked: Walked,
    use_cache: bool,
    workers: int | None,
    progress: ProgressSink | None,
    cache: StatCache | None,
    count: str | None,
    settle: bool,
) -> TreeResult:
    """``hash_tree`` without a distributed hasher: the folder cache's unchanged files,
    then every other file read (see ``foldercache``)."""
    fmt = count if count and counts.cache_key(count) else None
    kind = counts.cache_key(fmt) if fmt else None
    n = walked.count
    where = (cache.directory if cache is not None else statcache.cache_dir()) if use_cache else None
    prev = foldercache.load(where, walked.root, walked.boundary) if where is not None else None
    if prev is not None and fmt and prev.kind != kind:
        prev = None  # counts in another kind: every file is read again
    keys = bytearray(walked.keys)
    digests = bytearray(prev.digests) if prev is not None and prev.names == walked.names else None
    tallies = array("q")
    read = walked.read if prev is None else None
    if read is not None:  # read while walked: only what was not is read now
        digests = read.digests
        if fmt and read.kinds <= {fmt.lower()}:
            tallies = read.tallies
        else:
            tallies.frombytes(b"\xff" * (8 * n))
        for i in read.racy:  # never matched next time, as _hash_indices stores them
            KEY.pack_into(keys, i * KEY.size, *KEY.unpack_from(keys, i * KEY.size)[:4], _NEVER)
        todo = _unread(read.done)
        if progress is not None:  # read already: counted as done
            progress.add_total(read.nbytes)
            progress.advance(read.nbytes)
        keeper = held.current()  # the files it has room for are read again, and kept open
        again = _first_read(read.done, keeper.room()) if keeper is not None else []
        if settle and statcache.worth_settling(len(read.racy), _sizes(keys, read.racy)):
            again += read.racy  # read again once they are no longer racy
        if again:
            todo = sorted(set(todo).union(again))
    elif digests is not None and prev is not None:
        tallies.frombytes(prev.counts)
        todo = _changed_keys(walked.keys, prev.keys, n)
    else:
        digests = bytearray(32 * n)
        tallies.frombytes(b"\xff" * (8 * n))
        todo = _merge(walked, prev, digests, tallies) if prev is not None else list(range(n))
    if fmt:
        todo = sorted(set(todo) | {i for i, t in enumerate(tallies) if t < 0})
    todo = [i for i in todo if i not in walked.special]
    errors: dict[int, FtManifestError] = {}
    for i, mode in walked.special.items():
        errors[i] = _not_regular(Path(walked.path(_rel_at(walked.names, i))), mode)
    if cache is not None:
        fresh = len(todo) if read is None else n - len(walked.special)
        cache.hits += n - fresh - len(walked.special)
        cache.misses += fresh
    _hash_indices(walked, todo, fmt, keys, digests, tallies, errors, progress, workers, settle)
    if errors:
        raise errors[min(errors)]
    files = TreeFiles(walked.names, bytes(keys), bytes(digests), tallies if fmt else None, n)
    if prev is not None and not todo and prev.names == walked.names and prev.keys == walked.keys:
        digest, files.stored = prev.digest, prev.file  # nothing changed, nothing to store
    else:
        h = hashlib.sha256()
        for chunk in files.records():
            h.update(chunk)
        digest = f"sha256:{h.hexdigest()}"
        if where is not None:
            state = foldercache.State(
                walked.root, walked.boundary, digest, kind or (prev.kind if prev else None), n,
                walked.names, files.stats, tallies.tobytes(), files.digests,
            )  # fmt: skip
            files.stored = foldercache.store(where, state)
    total = sum(tallies) if fmt and n else (0 if fmt else None)
    return TreeResult(files, digest, total, files.size())


def _first_read(done: bytearray, k: int) -> list[int]:
    """The first ``k`` indices where ``done`` is 1."""
    out: list[int] = []
    i = done.find(1) if k else -1
    while i >= 0 and len(out) < k:
        out.append(i)
        i = done.find(1, i + 1)
    return out


def _unread(done: bytearray) -> list[int]:
    """The indices where ``done`` is 0."""
    out, i = [], done.find(0)
    while i >= 0:
        out.append(i)
        i = done.find(0, i + 1)
    return out


def _rel_at(names: bytes, i: int) -> str:
    return names.split(b"\0")[i].decode("utf-8")


def _sizes(keys: bytes | bytearray, indices: list[int]) -> int:
    """The bytes the files at ``indices`` hold, by their keys."""
    return sum(KEY.unpack_from(keys, i * KEY.size)[2] for i in indices)


def _changed_keys(here: bytes, stored: bytes, n: int) -> list[int]:
    """Indices whose key differs, comparing 1,024 keys at a time."""
    size, step, out = KEY.size, 1024, []
    for start in range(0, n, step):
        lo, hi = start * size, min(n, start + step) * size
        if here[lo:hi] != stored[lo:hi]:
            for i in range(start, min(n, start + step)):
                if here[i * size : (i + 1) * size] != stored[i * size : (i + 1) * size]:
                    out.append(i)
    return out


def _merge(walked: Walked, prev: Any, digests: bytearray, tallies: array[int]) -> list[int]:
    """The files added or changed since ``prev``, with the others' digests and counts
    copied from it: a merge of the two sorted lists of names."""
    size = KEY.size
    old = prev.names.split(b"\0")[:-1] if prev.count else []
    old_at = {name: j for j, name in enumerate(old)}
    stored_counts = array("q")
    stored_counts.frombytes(prev.counts)
    todo = []
    for i, name in enumerate(walked.names.split(b"\0")[:-1] if walked.count else []):
        j = old_at.get(name)
        if (
            j is None
            or walked.keys[i * size : (i + 1) * size] != prev.keys[j * size : (j + 1) * size]
        ):
            todo.append(i)
            continue
        digests[i * 32 : i * 32 + 32] = prev.digests[j * 32 : j * 32 + 32]
        tallies[i] = stored_counts[j]
    return todo


def _hash_indices(
    walked: Walked,
    todo: list[int],
    fmt: str | None,
    keys: bytearray,
    digests: bytearray,
    tallies: array[int],
    errors: dict[int, FtManifestError],
    progress: ProgressSink | None,
    workers: int | None,
    settle: bool,
) -> None:
    """Read the files at ``todo``; their keys, digests and counts into the arrays."""
    if not todo:
        return
    rels = walked.names.split(b"\0")
    if _forkable(len(todo), workers):
        todo = _hash_forked(walked, rels, todo, fmt, keys, digests, tallies, progress, settle)
    top = walked.root.rstrip("/")
    at: dict[Path, int] = {}
    jobs = []
    for i in todo:
        rel = rels[i].decode("utf-8")
        path = Path(walked.path(rel))
        dev, ino, size, mtime, ctime = KEY.unpack_from(walked.keys, i * KEY.size)
        at[path] = i
        jobs.append(_Job(path, f"{top}/{rel}", _Stat(size, mtime, ctime), fmt))
        if progress is not None:
            progress.add_total(size)
    results: dict[Path, FileDigest | FtManifestError] = {}

    def hashed(job: _Job, outcome: _Hashed) -> None:
        i = at[job.path]
        key = outcome.key
        racy = statcache.is_racy(key, outcome.hashed_at)
        KEY.pack_into(keys, i * KEY.size, key.dev % (1 << 64), key.ino % (1 << 64), key.size,
                      key.mtime_ns, _NEVER if racy else key.ctime_ns)  # fmt: skip
        digests[i * 32 : i * 32 + 32] = bytes.fromhex(outcome.digest.digest.partition(":")[2])
        n = outcome.digest.records
        tallies[i] = -1 if n is None else n

    if settle:
        jobs = _hash_settled(jobs, results, None, progress, workers, hashed)
    _hash_all(jobs, results, None, progress, workers, hashed)
    for path, result in results.items():
        if isinstance(result, FtManifestError):
            errors[at[path]] = result
