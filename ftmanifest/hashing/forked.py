"""Many small files of a walked tree read by forked worker processes.

Layer: file access (reads files).  Indices of a ``Walked`` in, their keys,
digests and counts into the tree's arrays; what a worker could not read or
saw change is left for ``read`` in this process, which says why.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import sys
import time
from array import array

from ftmanifest import counts, held, statcache
from ftmanifest.errors import FtManifestError
from ftmanifest.hashing.cpus import _daemonic, default_workers
from ftmanifest.hashing.files import _wait_past
from ftmanifest.hashing.listing import _NEVER, KEY, Walked
from ftmanifest.hashing.read import _OPEN_FLAGS, SMALL_FILE, _Cancelled
from ftmanifest.progress import ProgressSink

FORK_MIN = 4096  # small files to read past which worker processes read them
_FORKED: tuple[Walked, list[bytes], str | None] | None = None  # what forked workers read


def _forkable(n_files: int, workers: int | None) -> bool:
    """Worker processes for many small files: Python's per-file work holds the GIL, so
    threads do not help (``_hash_all``).  Forked, so they start in milliseconds and
    share the walk; only on Linux."""
    n = workers or default_workers(n_files)
    return n > 1 and n_files >= FORK_MIN and sys.platform == "linux" and not _daemonic()


def _hash_forked(
    walked: Walked,
    rels: list[bytes],
    todo: list[int],
    fmt: str | None,
    keys: bytearray,
    digests: bytearray,
    tallies: array[int],
    progress: ProgressSink | None,
    settle: bool,
) -> list[int]:
    """Read the small files of ``todo`` in worker processes; the indices left to read
    here: large files, the first ones ``held`` has room to keep open, and any a worker
    could not read or saw change (reading them again here reports why)."""
    import multiprocessing

    global _FORKED
    size_at = KEY.size
    small: list[int] = []
    left: list[int] = []
    for i in todo:
        (small if KEY.unpack_from(walked.keys, i * size_at)[2] < SMALL_FILE else left).append(i)
    keeper = held.current()  # the files it has room for are read here, and kept open
    room = min(keeper.room(), len(small)) if keeper is not None else 0
    left.extend(small[:room])
    small = small[room:]
    rounds = [small]
    if settle:  # as _hash_settled: the racy ones once they no longer are, if worth it
        now = time.time_ns() - statcache.RACY_NS
        stamped = {i: max(KEY.unpack_from(walked.keys, i * size_at)[3:5]) for i in small}
        racy = [i for i in small if stamped[i] >= now]
        nbytes = sum(KEY.unpack_from(walked.keys, i * size_at)[2] for i in racy)
        if statcache.worth_settling(len(racy), nbytes):
            rounds = [[i for i in small if stamped[i] < now], racy]
    n = default_workers(len(small))
    _FORKED = (walked, rels, fmt)
    try:
        with multiprocessing.get_context("fork").Pool(n) as pool:
            for k, batch in enumerate(rounds):
                if k and batch:
                    _wait_past(max(stamped[i] for i in batch))
                chunks = [batch[at : at + _CHUNK] for at in range(0, len(batch), _CHUNK)]
                for done, packed, failed, nbytes in pool.imap_unordered(_read_chunk, chunks):
                    if done and done[-1] - done[0] + 1 == len(done):  # a run: one copy
                        lo, hi = done[0], done[-1] + 1
                        keys[lo * size_at : hi * size_at] = packed[0]
                        digests[lo * 32 : hi * 32] = packed[1]
                        tallies[lo:hi] = array("q", packed[2])
                        done = []
                    for j, i in enumerate(done):
                        keys[i * size_at : (i + 1) * size_at] = packed[0][
                            j * size_at : (j + 1) * size_at
                        ]
                        digests[i * 32 : i * 32 + 32] = packed[1][j * 32 : j * 32 + 32]
                        tallies[i] = struct.unpack_from("<q", packed[2], j * 8)[0]
                    left.extend(failed)
                    if progress is not None:
                        progress.advance(nbytes)
    finally:
        _FORKED = None
    return sorted(left)


_CHUNK = 2000  # files a worker reads per task


def _read_chunk(chunk: list[int]) -> tuple[list[int], tuple[bytes, bytes, bytes], list[int], int]:
    """In a worker: read the small files at ``chunk``.  Returns the indices read, their
    keys, digests and counts packed, the indices not read, and the bytes read.

    A file is read only when its descriptor's stat is the walk's (the path named this
    file when it was walked), in one read of its size and one more byte, and taken
    only when that read returned exactly its size and the stat held still: else it is
    left for ``_digest_open`` here, which says what changed.
    """
    assert _FORKED is not None
    walked, rels, fmt = _FORKED
    prefix = walked.root.rstrip("/").encode("utf-8") + b"/"
    keys, digests, counted = bytearray(), bytearray(), bytearray()
    done, failed, nbytes = [], [], 0
    pack, unpack, window, sha256 = KEY.pack, KEY.unpack_from, statcache.RACY_NS, hashlib.sha256
    for i in chunk:
        walked_key = unpack(walked.keys, i * KEY.size)
        hashed_at = time.time_ns()
        try:
            fd = os.open(prefix + rels[i], _OPEN_FLAGS)
        except OSError:
            failed.append(i)
            continue
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if key != walked_key or not stat.S_ISREG(st.st_mode):
                failed.append(i)
                continue
            data = os.read(fd, key[2] + 1)
            st = os.fstat(fd)
        except OSError:
            failed.append(i)
            continue
        finally:
            os.close(fd)
        if len(data) != key[2] or (st.st_size, st.st_mtime_ns, st.st_ctime_ns) != key[2:]:
            failed.append(i)
            continue
        n_records = -1
        if fmt:
            counter = counts.counter_for(fmt)
            try:
                if counter is None:
                    raise _Cancelled  # counted after hashing: read here, not in a worker
                counter.feed(memoryview(data))
                n_records = counter.result()
            except (FtManifestError, _Cancelled):
                failed.append(i)  # a record count error: read again here, which says so
                continue
        racy = max(key[3], key[4]) >= hashed_at - window
        keys += pack(*key[:4], _NEVER if racy else key[4])
        digests += sha256(data).digest()
        counted += struct.pack("<q", n_records)
        done.append(i)
        nbytes += key[2]
    return done, (bytes(keys), bytes(digests), bytes(counted)), failed, nbytes
