"""A first hash that reads as it walks: ``walk_tree(read=Ahead(...))``.

Forked workers walk a share of the folders each and read the small regular files
on the way.  Every test compares the result with the plain walk and hash, which
reads every file through the normal path, and the attacks change what is on disk
between the listing and the read.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

import ftmanifest.hashing.cpus as hashing_cpus
import ftmanifest.hashing.files as hashing_files
import ftmanifest.hashing.listing as hashing_listing
import ftmanifest.hashing.tree as hashing_tree
import ftmanifest.hashing.walk as hashing_walk
from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.hashing.digests import SymlinkEscapeError, TreeResult, UnreadableFileError
from ftmanifest.hashing.listing import Ahead
from ftmanifest.hashing.read import SMALL_FILE
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.hashing.walk import walk_tree
from ftmanifest.statcache import StatCache
from tests.conftest import settle

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="read-ahead forks: Linux only")


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Walk one folder here and share out the rest, on two CPUs; what the parent
    joined from workers is counted (a piece per folder)."""
    monkeypatch.setattr(hashing_walk, "READ_AHEAD_MIN", 1)
    monkeypatch.setattr(hashing_walk, "_SPLIT", 1)  # the root's folders are the pieces
    for module in (hashing_cpus, hashing_files, hashing_walk):  # its lookups
        monkeypatch.setattr(module, "_cpus", lambda: 2)
    joined: list[int] = []
    real = hashing_walk._join

    def spy(out: hashing_listing._ReadOut, got: tuple[bytes, ...]) -> None:
        joined.append(1)
        real(out, got)

    monkeypatch.setattr(hashing_walk, "_join", spy)
    return joined


def tree(root: Path, n: int = 40) -> Path:
    for i in range(n):
        folder = root / f"d{i // 10}" / ("deep" if i % 3 == 0 else "")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"part-{i:03d}.jsonl").write_text(f'{{"i": {i}}}\n' * (i % 4))
    (root / "d1" / "ünïcode ✓.jsonl").write_text('{"u": 1}\n')
    (root / "big.jsonl").write_bytes(b'{"b": 0}\n' * (SMALL_FILE // 9 + 10))
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref\n")
    (root / "d2" / "link.jsonl").symlink_to(root / "d0" / "part-001.jsonl")
    (root / "linked").symlink_to(root / "d3")
    settle(*root.rglob("*"))
    return root


def plain(root: Path, **kw: object) -> TreeResult:
    return hash_tree(root, use_cache=False, **kw)  # type: ignore[arg-type]


def ahead(root: Path, count: str | None = None, **kw: object) -> TreeResult:
    walked = walk_tree(root, read=Ahead(count is not None, None))
    assert walked.read is not None, "the walk did not read ahead"
    return hash_tree(root, use_cache=False, walked=walked, count=count, **kw)  # type: ignore[arg-type]


def same(a: TreeResult, b: TreeResult) -> None:
    assert a.digest == b.digest
    assert a.records == b.records and a.size == b.size
    assert dict(a.files) == dict(b.files)


def test_reading_ahead_gives_the_plain_hash(tmp_path: Path, workers: list[int]) -> None:
    root = tree(tmp_path / "t")
    same(ahead(root, "jsonl"), plain(root, count="jsonl"))
    same(ahead(root), plain(root))
    assert workers, "no folder was read by a worker"


def test_what_was_read_on_the_way_is_what_the_walk_keyed(tmp_path: Path, workers: list[int]):
    root = tree(tmp_path / "t")
    walked = walk_tree(root, read=Ahead())
    plain_walk = walk_tree(root)
    assert (walked.names, walked.keys, walked.special) == (
        plain_walk.names,
        plain_walk.keys,
        plain_walk.special,
    )
    read = walked.read
    assert read is not None
    rels = walked.rels()
    big, link = rels.index("big.jsonl"), rels.index("d2/link.jsonl")
    assert read.done[big] == 0 and read.done[link] == 0  # read by the hash, not the walk
    assert sum(read.done) == len(rels) - 2 - len(rels) // 100


def test_counts_are_kept_only_when_every_file_was_counted_in_the_folders_format(
    tmp_path: Path, workers: list[int]
) -> None:
    root = tree(tmp_path / "t")
    (root / "d0" / "table.csv").write_text("a,b\n1,2\n3,4\n")
    settle(root / "d0" / "table.csv")
    walked = walk_tree(root, read=Ahead(True, None))
    assert walked.read is not None and walked.read.kinds == {"jsonl", "csv"}
    got = hash_tree(root, use_cache=False, walked=walked, count="jsonl")
    same(got, plain(root, count="jsonl"))  # the .csv counted as lines, by reading again


def _escaping(tmp_path: Path, *links: str) -> Path:
    """The tree, with ``links`` leading to a file outside it."""
    root = tree(tmp_path / "t")
    (tmp_path / "secret").write_text("outside\n")
    for link in links:
        (root / link).symlink_to(tmp_path / "secret")
    return root


def test_a_symlink_out_of_the_tree_is_refused_as_the_walk_refuses_it(
    tmp_path: Path, workers: list[int]
) -> None:
    root = _escaping(tmp_path, "d3/zz.jsonl")
    with pytest.raises(SymlinkEscapeError) as plain_error:
        walk_tree(root)
    with pytest.raises(SymlinkEscapeError) as ahead_error:
        walk_tree(root, read=Ahead())
    assert str(ahead_error.value) == str(plain_error.value)


def test_a_fifo_is_listed_never_opened(tmp_path: Path, workers: list[int]) -> None:
    root = tree(tmp_path / "t")
    os.mkfifo(root / "d2" / "pipe.jsonl")
    with pytest.raises(UnreadableFileError, match="FIFO"):
        ahead(root)


def _swap_after_listing(monkeypatch: pytest.MonkeyPatch, victim: Path, to: Path) -> None:
    """Replace ``victim`` by a symlink to ``to`` once its folder was listed (its
    directory entry still says a regular file)."""
    real = hashing_listing._listing

    def listing(folder: str, rel: str, boundary: str, *, lazy: bool):  # type: ignore[no-untyped-def]
        found = real(folder, rel, boundary, lazy=lazy)
        if lazy and folder == str(victim.parent):
            victim.unlink()
            victim.symlink_to(to)
        return found

    monkeypatch.setattr(hashing_listing, "_listing", listing)


def test_a_file_swapped_for_a_symlink_after_listing_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the parent (the swap is patched here): the name opened with O_NOFOLLOW
    is a link now, and a link the walk did not judge is never read."""
    monkeypatch.setattr(hashing_walk, "READ_AHEAD_MIN", 10**9)  # all in this process
    monkeypatch.setattr(hashing_walk, "_SPLIT", 1)  # and the folders walked whole, reading
    root = tree(tmp_path / "t")
    (tmp_path / "secret").write_text('{"leaked": true}\n')
    victim = root / "d1" / "part-011.jsonl"
    _swap_after_listing(monkeypatch, victim, tmp_path / "secret")
    with pytest.raises(UnreadableFileError) as caught:
        ahead(root)
    assert "part-011.jsonl" in str(caught.value)


def test_a_file_that_vanishes_after_listing_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hashing_walk, "READ_AHEAD_MIN", 10**9)
    monkeypatch.setattr(hashing_walk, "_SPLIT", 1)
    root = tree(tmp_path / "t")
    victim = root / "d1" / "part-011.jsonl"
    real = hashing_listing._listing

    def listing(folder: str, rel: str, boundary: str, *, lazy: bool):  # type: ignore[no-untyped-def]
        found = real(folder, rel, boundary, lazy=lazy)
        if lazy and folder == str(victim.parent):
            victim.unlink()
        return found

    monkeypatch.setattr(hashing_listing, "_listing", listing)
    with pytest.raises(InputNotFoundError) as caught:
        walk_tree(root, read=Ahead())
    assert "part-011.jsonl" in str(caught.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything")
def test_an_unreadable_file_is_named_by_the_hash(tmp_path: Path, workers: list[int]) -> None:
    root = tree(tmp_path / "t")
    locked = root / "d2" / "part-020.jsonl"
    locked.chmod(0)
    try:
        with pytest.raises(UnreadableFileError, match="part-020"):
            ahead(root)
    finally:
        locked.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_fresh_files_are_read_ahead_but_never_cached(tmp_path: Path, workers: list[int]):
    """Written just now: racy, so the next hash reads them again, as the plain path does.
    (Stamped a minute ahead, so a loaded machine slower than the racy window between
    writing and hashing still sees them as fresh.)"""
    root = tmp_path / "t"
    ahead = time.time_ns() + 60_000_000_000
    for i in range(30):
        (root / f"d{i // 10}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i // 10}" / f"p{i}.jsonl").write_text(f"{i}\n")
        os.utime(root / f"d{i // 10}" / f"p{i}.jsonl", ns=(ahead, ahead))
    walked = walk_tree(root, read=Ahead())
    assert walked.read is not None and len(walked.read.racy) == 30
    with StatCache(tmp_path / "c") as cache:
        hash_tree(root, cache=cache, walked=walked)
    with StatCache(tmp_path / "c") as cache:
        again = hash_tree(root, cache=cache)
        assert cache.misses == 30  # none trusted from the first
    same(again, plain(root))


def test_lock_reads_ahead_only_where_the_folder_cache_knows_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ftmanifest.verify import observe

    root = tree(tmp_path / "t")
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    asked: list[object] = []
    real = hashing_walk.walk_tree

    def spy(path, **kw):  # type: ignore[no-untyped-def]
        asked.append(kw.get("read"))
        return real(path, **kw)

    monkeypatch.setattr(hashing_tree, "walk_tree", spy)  # the name hash_tree looks up
    monkeypatch.setattr(observe, "walk_tree", spy)  # the name observe imported
    first = observe.hash_path(root, root, use_cache=True, count=True)
    again = observe.hash_path(root, root, use_cache=True, count=True)
    fresh = observe.hash_path(root, root, use_cache=False, count=True)
    assert [a is not None for a in asked] == [True, False, True]
    assert first.digest == again.digest == fresh.digest == plain(root).digest
    assert first.records == again.records == fresh.records


def test_while_files_are_held_the_first_are_read_again_and_kept(
    tmp_path: Path, workers: list[int]
) -> None:
    """verify holds what it hashed open: the files it has room for are read by the
    hash in this process (and kept), the rest came from the walk's workers."""
    from ftmanifest import held

    root = tree(tmp_path / "t")
    with held.holding(limit=3) as kept:
        got = ahead(root)
        names = sorted(kept.descriptors())
    same(got, plain(root))
    assert workers and len(names) == 3
    # the first files hashed are kept: the first small ones here, and the large one
    # when its pool thread got there first (it is read by the hash in any case)
    first = [r for r in walk_tree(root).rels() if not r.startswith("big")][:3]
    assert set(names) <= {os.path.abspath(root / r) for r in [*first, "big.jsonl"]}


def test_the_plain_walk_shared_out_is_the_one_walk(tmp_path: Path, workers: list[int]) -> None:
    """Without ``read`` the workers only walk: the same names, keys and kinds as one
    process walking alone, and nothing claims to have been read."""
    root = tree(tmp_path / "t")
    os.mkfifo(root / "d2" / "pipe.jsonl")
    shared = walk_tree(root)
    assert workers, "no folder was walked by a worker"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hashing_walk, "_read_ahead_here", lambda: False)
        alone = walk_tree(root)
    assert shared.read is None
    assert (shared.names, shared.keys, shared.special, shared.count) == (
        alone.names,
        alone.keys,
        alone.special,
        alone.count,
    )


def test_a_shared_out_walk_raises_the_first_error_in_path_order(
    tmp_path: Path, workers: list[int]
) -> None:
    root = _escaping(tmp_path, "d3/zz.jsonl", "d1/aa.jsonl")
    with pytest.raises(SymlinkEscapeError) as shared:
        walk_tree(root)
    assert "d1/aa.jsonl" in str(shared.value)


def _walk_in_a_pool_worker(root: str) -> bytes:
    return walk_tree(root).names


def test_a_pool_worker_walks_alone(tmp_path: Path, workers: list[int]) -> None:
    """A pool's worker may not start processes: there the walk is one process's."""
    import multiprocessing

    root = tree(tmp_path / "t")
    with multiprocessing.get_context("fork").Pool(1) as pool:
        names = pool.apply(_walk_in_a_pool_worker, (str(root),))
    assert names == walk_tree(root).names


class _Tally:
    def __init__(self) -> None:
        self.total = self.done = 0

    def add_total(self, nbytes: int) -> None:
        self.total += nbytes

    def advance(self, nbytes: int) -> None:
        self.done += nbytes


def test_progress_counts_what_the_walk_read(tmp_path: Path, workers: list[int]) -> None:
    root = tree(tmp_path / "t")
    tally = _Tally()
    walked = walk_tree(root, read=Ahead())
    got = hash_tree(root, use_cache=False, walked=walked, progress=tally)
    assert tally.total == tally.done == got.size


def test_a_name_that_is_not_utf8_is_refused_as_the_walk_refuses_it(
    tmp_path: Path, workers: list[int]
) -> None:
    root = tree(tmp_path / "t")
    bad = os.path.join(os.fsencode(root / "d2"), b"bad-\xff.jsonl")
    with open(bad, "wb") as fh:
        fh.write(b"{}\n")
    with pytest.raises(InputError) as alone:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(hashing_walk, "_read_ahead_here", lambda: False)
            walk_tree(root)
    with pytest.raises(InputError) as ahead_error:
        walk_tree(root, read=Ahead())
    assert type(ahead_error.value) is type(alone.value)
    assert str(ahead_error.value) == str(alone.value)
