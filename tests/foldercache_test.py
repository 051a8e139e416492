"""The folder cache: a re-hash of an unchanged folder takes its files from
one compact state, and never a digest that the bytes on disk do not have.

Each attack changes what a reader would load, then checks the cached hash against
a hash that reads every byte (``use_cache=False``)."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ftmanifest.hashing.cpus as hashing_cpus
import ftmanifest.hashing.files as hashing_files
import ftmanifest.hashing.forked as hashing_forked
import ftmanifest.hashing.tree as hashing_tree
import ftmanifest.hashing.walk as hashing_walk
from ftmanifest import foldercache, treelist
from ftmanifest.errors import FtManifestError
from ftmanifest.hashing.digests import TreeResult, UnreadableFileError, tree_digest
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.hashing.walk import walk_tree
from ftmanifest.statcache import StatCache
from tests.conftest import settle


def shards(root: Path, n: int = 30) -> Path:
    for i in range(n):
        folder = root / f"d{i // 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"part-{i:03d}.jsonl").write_text(f'{{"i": {i}}}\n')
    settle(*root.rglob("*.jsonl"))
    return root


def cached(root: Path, where: Path, **kw: object) -> tuple[TreeResult, StatCache]:
    with StatCache(where) as cache:
        return hash_tree(root, cache=cache, **kw), cache  # type: ignore[arg-type]


def truth(root: Path, **kw: object) -> TreeResult:
    return hash_tree(root, use_cache=False, **kw)  # type: ignore[arg-type]


def test_an_unchanged_folder_reads_no_file_and_agrees(tmp_path: Path) -> None:
    root = shards(tmp_path / "t")
    first, c1 = cached(root, tmp_path / "c", count="jsonl")
    again, c2 = cached(root, tmp_path / "c", count="jsonl")
    assert (c1.misses, c2.misses, c2.hits) == (30, 0, 30)
    want = truth(root, count="jsonl")
    assert again.digest == first.digest == want.digest
    assert again.records == want.records == 30 and again.size == want.size
    assert dict(again.files) == dict(want.files)
    assert again.digest == tree_digest({r: f.digest for r, f in again.files.items()})


def rewrite_keeping_times(path: Path, data: bytes) -> None:
    st = path.stat()
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back: ctime moves


@pytest.mark.parametrize(
    "change",
    [
        "same size, mtime put back",
        "replaced by rename, same size and mtime",
        "added",
        "removed",
        "renamed",
        "a folder renamed",
        "a file turned into a folder",
    ],
)
def test_every_change_is_read_again(tmp_path: Path, change: str) -> None:
    root = shards(tmp_path / "t")
    cached(root, tmp_path / "c", count="jsonl")
    target = root / "d1" / "part-012.jsonl"
    if change == "same size, mtime put back":
        rewrite_keeping_times(target, b'{"i": 99}\n')
    elif change == "replaced by rename, same size and mtime":
        new = root / "d1" / ".new"
        new.write_bytes(b'{"i": 98}\n')
        st = target.stat()
        os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(new, target)
    elif change == "added":
        (root / "d1" / "part-012b.jsonl").write_text('{"i": 1}\n{"i": 2}\n')
    elif change == "removed":
        target.unlink()
    elif change == "renamed":
        target.rename(root / "d1" / "part-912.jsonl")
    elif change == "a folder renamed":
        (root / "d1").rename(root / "d1x")
    else:
        target.unlink()
        target.mkdir()
        (target / "inner.jsonl").write_text('{"i": 7}\n')
    again, _ = cached(root, tmp_path / "c", count="jsonl")
    want = truth(root, count="jsonl")
    assert (again.digest, again.records, again.size) == (want.digest, want.records, want.size)
    assert dict(again.files) == dict(want.files)


def test_a_file_hashed_while_racy_is_read_again(tmp_path: Path) -> None:
    """Changed inside the racy window when hashed: a same-tick rewrite could keep its
    stat, so its key is stored as one no file has."""
    root = shards(tmp_path / "t")
    (root / "d0" / "fresh.jsonl").write_text('{"i": 1}\n')  # not settled
    first, _ = cached(root, tmp_path / "c", count="jsonl")
    again, cache = cached(root, tmp_path / "c", count="jsonl")
    assert cache.misses == 1 and again.digest == first.digest


@pytest.mark.parametrize("damage", ["truncated", "flipped digest", "garbage", "fifo", "symlink"])
def test_a_damaged_state_is_a_miss_never_a_digest(tmp_path: Path, damage: str) -> None:
    root = shards(tmp_path / "t")
    cached(root, tmp_path / "c")
    (state,) = (tmp_path / "c" / "trees").glob("*.tree")
    (root / "d2" / "part-025.jsonl").write_text('{"i": "changed"}\n')
    settle(root / "d2" / "part-025.jsonl")
    data = state.read_bytes()
    state.unlink()
    if damage == "truncated":
        state.write_bytes(data[: len(data) - 7])
    elif damage == "flipped digest":
        state.write_bytes(data[:-5] + bytes([data[-5] ^ 1]) + data[-4:])
    elif damage == "garbage":
        state.write_bytes(b"not a state")
    elif damage == "fifo":
        os.mkfifo(state)
    else:
        (tmp_path / "elsewhere").write_bytes(data)
        state.symlink_to(tmp_path / "elsewhere")
    assert foldercache.read(state) is None
    again, cache = cached(root, tmp_path / "c")
    assert cache.hits == 0 and again.digest == truth(root).digest


def test_a_state_of_another_folder_is_not_taken(tmp_path: Path) -> None:
    """A pointer naming another folder's state (same names, other bytes) is a miss."""
    one, two = shards(tmp_path / "one"), shards(tmp_path / "two")
    (two / "d0" / "part-001.jsonl").write_text('{"i": "other"}\n')
    settle(two / "d0" / "part-001.jsonl")
    cached(one, tmp_path / "c")
    cached(two, tmp_path / "c")
    folders = tmp_path / "c" / "folders"
    key_one = foldercache.root_key(os.path.abspath(one), os.path.realpath(one))
    key_two = foldercache.root_key(os.path.abspath(two), os.path.realpath(two))
    (folders / key_two).write_text((folders / key_one).read_text())
    again, cache = cached(two, tmp_path / "c")
    assert cache.hits == 0 and again.digest == truth(two).digest


def test_another_symlink_boundary_is_another_state(tmp_path: Path) -> None:
    root = shards(tmp_path / "t")
    cached(root, tmp_path / "c")
    _, cache = cached(root, tmp_path / "c", symlink_root=tmp_path)
    assert cache.hits == 0


def test_counts_in_another_format_are_counted_again(tmp_path: Path) -> None:
    root = shards(tmp_path / "t")
    cached(root, tmp_path / "c", count="csv")
    again, cache = cached(root, tmp_path / "c", count="jsonl")
    assert cache.misses == 30 and again.records == truth(root, count="jsonl").records
    plain, cache = cached(root, tmp_path / "c")
    assert cache.hits == 30 and plain.records is None


def test_a_special_file_is_still_refused(tmp_path: Path) -> None:
    root = shards(tmp_path / "t")
    cached(root, tmp_path / "c")
    os.mkfifo(root / "d1" / "pipe.jsonl")
    with pytest.raises(UnreadableFileError, match="FIFO"):
        cached(root, tmp_path / "c")


def test_the_state_is_private_and_names_its_list(tmp_path: Path, monkeypatch) -> None:
    """0600 in a 0700 folder; a replaced state is the pinned list of its digest,
    trusted only when its records hash to it."""
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "c"))
    root = shards(tmp_path / "t")
    first, _ = cached(root, tmp_path / "c")
    (root / "d0" / "part-003.jsonl").write_text('{"i": "changed"}\n')
    settle(root / "d0" / "part-003.jsonl")
    cached(root, tmp_path / "c")
    states = sorted((tmp_path / "c" / "trees").glob("*.tree"))
    assert len(states) == 2
    assert stat.S_IMODE((tmp_path / "c" / "trees").stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in states)
    listed = treelist.read(first.digest)
    assert listed == {rel: fd.digest for rel, fd in first.files.items()}
    (old,) = foldercache.find(tmp_path / "c", first.digest)
    state = foldercache.read(old)
    assert state is not None
    forged = foldercache.State(
        state.root, state.boundary, state.digest, state.kind, state.count,
        state.names, state.keys, state.counts, bytes(32) + state.digests[32:],
    )  # fmt: skip
    old.unlink()
    foldercache.store(tmp_path / "c", forged)
    assert treelist.read(first.digest) is None


def test_many_folders_keep_the_states_used_last(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(foldercache, "KEEP", 3)
    roots = [shards(tmp_path / f"t{i}", 3) for i in range(5)]
    for root in roots:
        cached(root, tmp_path / "c")
        time.sleep(0.01)
    assert len(list((tmp_path / "c" / "trees").glob("*.tree"))) == 3
    _, cache = cached(roots[-1], tmp_path / "c")
    assert cache.hits == 3


Forked = list[list[int]]


@pytest.fixture
def fork_small(monkeypatch: pytest.MonkeyPatch) -> Iterator[Forked]:
    """Worker processes from the tenth small file on, two of them."""
    monkeypatch.setattr(hashing_forked, "FORK_MIN", 10)
    monkeypatch.setattr(hashing_forked, "_CHUNK", 7)
    for module in (hashing_cpus, hashing_files, hashing_walk, hashing_forked):  # its lookups
        monkeypatch.setattr(module, "default_workers", lambda n: 2)
    real, calls = hashing_forked._hash_forked, []

    def spy(*args: object, **kw: object) -> list[int]:
        left = real(*args, **kw)  # type: ignore[arg-type]
        calls.append(left)
        return left

    monkeypatch.setattr(hashing_tree, "_hash_forked", spy)  # where tree looks it up
    yield calls
    assert calls, "no worker process read anything"


def test_worker_processes_read_what_this_process_reads(tmp_path: Path, fork_small: Forked) -> None:
    root = shards(tmp_path / "t", 40)
    (root / "d0" / "big.jsonl").write_bytes(b'{"i": 1}\n' * 40_000)  # past SMALL_FILE: a thread
    settle(root / "d0" / "big.jsonl")
    forked, cache = cached(root, tmp_path / "c", count="jsonl")
    assert cache.misses == 41 and fork_small == [[0]]  # d0/big.jsonl, large, is left here
    alone = hash_tree(root, use_cache=False, count="jsonl", workers=1)
    assert (forked.digest, forked.records, forked.size) == (alone.digest, alone.records, alone.size)
    assert dict(forked.files) == dict(alone.files)
    again, cache = cached(root, tmp_path / "c", count="jsonl")
    assert cache.hits == 41 and again.digest == alone.digest


def test_a_file_gone_after_the_walk_is_reported_not_skipped(
    tmp_path: Path, fork_small: Forked
) -> None:
    root = shards(tmp_path / "t", 40)
    walked = walk_tree(root)
    (root / "d2" / "part-021.jsonl").unlink()
    with pytest.raises(FtManifestError, match="part-021"):
        hash_tree(root, use_cache=False, walked=walked)


def test_workers_settle_fresh_files_before_caching(tmp_path: Path, fork_small: Forked) -> None:
    root = tmp_path / "t"
    for i in range(20):
        (root / "d").mkdir(parents=True, exist_ok=True)
        (root / "d" / f"f{i:02d}.txt").write_text(f"{i}\n")  # fresh: racy now
    first, _ = cached(root, tmp_path / "c", settle=True)
    again, cache = cached(root, tmp_path / "c")
    assert cache.hits == 20 and again.digest == first.digest == truth(root).digest
