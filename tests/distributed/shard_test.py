"""Hashing split over ranks (ftmanifest.distributed.shard), without torchrun.

``assign`` is pure and tested alone.  ``hash_files`` runs on threads, one per
rank, over ``Comm``'s own JSON gather (tests/distributed/threads.py), so a
result that does not survive the wire fails here too.  The torchrun tests
(lock_scan_test.py) run the same code over real processes.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftmanifest.distributed import shard
from ftmanifest.distributed.shard import FILE_COST, FileKey, Planned, assign
from ftmanifest.errors import FtManifestError
from ftmanifest.hashing.digests import FileChangedError
from ftmanifest.hashing.files import hash_file, hash_files
from ftmanifest.statcache import StatCache
from tests.distributed.threads import ThreadComm, on_ranks


def same(a: dict[Path, Any], b: dict[Path, Any]) -> None:
    """Equal results: digests equal, errors of one class with one message and fields."""
    assert list(a) == list(b)
    for p in a:
        x, y = a[p], b[p]
        if isinstance(x, FtManifestError) or isinstance(y, FtManifestError):
            assert type(x) is type(y), (p, x, y)
            assert (x.message, x.path, x.observed, x.hint) == (
                y.message,
                y.path,
                y.observed,
                y.hint,
            )
            assert getattr(x, "digest", None) == getattr(y, "digest", None)
        else:
            assert x == y, p


# --- assign ---------------------------------------------------------------------


def key(path: str, size: int, node: str = "0/h", ino: int | None = None) -> FileKey:
    return FileKey(node, 1, ino if ino is not None else hash(path) & 0xFFFF, size, 5, 6, path, None)


def test_assign_splits_a_shared_folder_evenly_and_each_file_once() -> None:
    keys = [key(f"f{i}", size) for i, size in enumerate([900, 500, 400, 300, 300, 100, 100, 0])]
    owner = assign([keys, keys])
    assert set(owner) == set(keys)
    load = [sum(k.size + FILE_COST for k in keys if owner[k] == r) for r in (0, 1)]
    assert abs(load[0] - load[1]) <= 900 + FILE_COST  # LPT: within the largest file
    assert owner[keys[0]] == 0 and owner[keys[1]] == 1  # largest first, ties to rank 0


def test_assign_is_the_same_whatever_order_the_ranks_list_files_in() -> None:
    keys = [key(f"f{i}", random.Random(i).randrange(1000)) for i in range(50)]
    shuffled = keys[:]
    random.Random(7).shuffle(shuffled)
    assert assign([keys, shuffled, keys[::-1]]) == assign([shuffled, keys, keys])


def test_a_file_only_one_rank_sees_is_read_by_that_rank() -> None:
    shared = [key(f"s{i}", 10) for i in range(4)]
    own_copy = key("data/x", 10_000, node="1/other")  # the other node's own copy
    owner = assign([[*shared, key("data/x", 10_000)], [*shared, own_copy], []])
    assert owner[own_copy] == 1
    assert owner[key("data/x", 10_000)] == 0
    assert 2 not in owner.values()  # a rank that sees nothing gets nothing


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 10**6), st.sets(st.integers(0, 3), min_size=1)),
        max_size=40,
    )
)
def test_assign_properties(files: list[tuple[int, int, set[int]]]) -> None:
    views: list[list[FileKey | None]] = [[None] for _ in range(4)]
    for i, (ino, size, ranks) in enumerate(files):
        k = key(f"p{i % 7}", size, ino=ino)
        for r in sorted(ranks):
            views[r].append(k)
    owner = assign(views)
    seen = {k for view in views for k in view if k is not None}
    assert set(owner) == seen  # every file exactly once (a dict: at most once)
    for k, r in owner.items():
        assert k in views[r]  # never a rank that does not see it
    assert assign([list(reversed(v)) for v in views]) == owner


# --- hash_files -----------------------------------------------------------------


@pytest.fixture
def odd_folder(tmp_path: Path) -> list[Path]:
    """Files of many sizes, a missing path, a FIFO, a folder, a file that changes as it is read."""
    rng = random.Random(3)
    paths = []
    for i in range(12):
        p = tmp_path / f"f{i:02}.bin"
        p.write_bytes(rng.randbytes(rng.choice([0, 10, 5000, 300_000])))
        paths.append(p)
    (tmp_path / "rows.json").write_text("[1, 2,", "utf-8")  # counted: malformed
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    return [
        *paths,
        tmp_path / "rows.json",
        tmp_path / "missing.bin",
        fifo,
        tmp_path,
        Path("/proc/version"),  # a regular file whose size says 0 but reads bytes: "changed"
        paths[3],  # listed twice
    ]


def test_two_ranks_give_exactly_the_single_process_result(odd_folder: list[Path]) -> None:
    count = {odd_folder[12]: "json"}
    single = hash_files(odd_folder, use_cache=False, count=count)
    assert isinstance(single[Path("/proc/version")], FileChangedError)
    assert isinstance(single[odd_folder[12]], FtManifestError)  # the count failed...
    assert single[odd_folder[12]].digest is not None  # type: ignore[union-attr]  # ...with a digest
    caches = [StatCache(odd_folder[0].parent / f"cache{r}") for r in (0, 1)]

    def rank(comm: ThreadComm) -> Any:
        return shard.hash_files(comm, odd_folder, count=count, cache=caches[comm.rank])

    results = on_ranks([rank, rank])
    for result in results:
        assert not isinstance(result, BaseException), result
        same(single, result)
    # the files were split: after asking its cache for every file (all new), each
    # rank looked up again, then read, only its share
    regular = 12 + 2  # the .bin files, rows.json and /proc/version
    shares = [c.misses - regular for c in caches]
    assert sum(shares) == regular and min(shares) >= 4, shares


def test_ranks_on_different_nodes_read_their_own_copies(tmp_path: Path) -> None:
    for r in (0, 1):
        (tmp_path / f"node{r}").mkdir()
        for i in range(5):
            (tmp_path / f"node{r}" / f"{i}.txt").write_text(f"file {i}\n", "utf-8")
    (tmp_path / "node1" / "3.txt").write_text("file 3, changed on node 1\n", "utf-8")
    caches = [StatCache(tmp_path / f"cache{r}") for r in (0, 1)]

    def rank(comm: ThreadComm) -> Any:
        files = [tmp_path / f"node{comm.rank}" / f"{i}.txt" for i in range(5)]
        return shard.hash_files(comm, files, cache=caches[comm.rank])

    mine = on_ranks([rank, rank], nodes=[0, 1])
    for r in (0, 1):
        files = [tmp_path / f"node{r}" / f"{i}.txt" for i in range(5)]
        same(hash_files(files, use_cache=False), mine[r])
        assert caches[r].misses == 5 + 5  # no node reads another node's files
    digests = [[fd.digest for fd in result.values()] for result in mine]
    assert [i for i in range(5) if digests[0][i] != digests[1][i]] == [3]


def test_the_same_path_on_two_nodes_is_two_files(tmp_path: Path) -> None:
    """Same path, same inode numbers after an image copy: the node tells them apart."""
    p = tmp_path / "w.bin"
    p.write_bytes(b"x" * 1000)
    caches = [StatCache(tmp_path / f"cache{r}") for r in (0, 1)]
    on_ranks([lambda c: shard.hash_files(c, [p], cache=caches[c.rank])] * 2, nodes=[0, 1])
    assert caches[0].misses == caches[1].misses == 1 + 1


def test_ranks_asking_for_different_hashing_are_refused_on_every_rank(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a", "utf-8")
    results = on_ranks(
        [
            lambda c: shard.hash_files(c, [tmp_path / "a"], use_cache=False),
            lambda c: shard.hash_files(c, [tmp_path / "a"], use_cache=False, count="text"),
        ]
    )
    assert all(isinstance(r, shard.RankMismatchError) for r in results), results
    assert results[0].exit_code == 1


def test_planned_asks_the_job_once_and_serves_each_call(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"a": 1}\n{"a": 2}\n', "utf-8")
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"w" * 100)
    calls: list[list[Path]] = []

    def hasher(paths: Any, **kw: Any) -> Any:
        calls.append(list(paths))
        return hash_files(paths, **kw)

    planned = Planned()
    assert isinstance(planned([weights]), dict)
    planned([rows], count="jsonl")
    planned([rows])  # the same file without a count (a pinned file that is also data)
    planned.run(hasher, use_cache=False)
    assert calls == [[weights, rows]]
    assert planned([rows], count="jsonl")[rows].records == 2  # type: ignore[union-attr]
    served = planned([rows], use_cache=False)[rows]
    assert served == hash_files([rows], use_cache=False)[rows]
    assert served.records is None  # type: ignore[union-attr]  # asked without: read again
    assert planned([weights])[weights] == hash_file(weights, use_cache=False)


def test_a_rank_at_another_step_is_a_mismatch_not_a_crash(tmp_path: Path) -> None:
    """One rank skipped a hashing call and is gathering something else (its fingerprint)."""
    (tmp_path / "a").write_text("a", "utf-8")
    results = on_ranks(
        [
            lambda c: shard.hash_files(c, [tmp_path / "a"], use_cache=False),
            lambda c: c.all_gather_json({"rank": 1, "packages": {}}, "fingerprints"),
        ]
    )
    assert isinstance(results[0], shard.RankMismatchError), results
    assert "rank 1" in (results[0].observed or "")


OPEN_AT = """\
import sys, time
from ftmanifest.statcache import StatCache
from tests.distributed.threads import ThreadComm, on_ranks
while time.time() < float(sys.argv[2]):
    pass
print(StatCache(sys.argv[1]).enabled)
"""


def test_two_ranks_opening_one_new_cache_at_once_both_use_it(tmp_path: Path) -> None:
    """Two ranks of one host share the default cache folder, and start together.

    SQLite refuses the second switch to WAL at once ("database is locked",
    no busy wait): without a retry one rank hashed without its cache.
    """
    import subprocess
    import sys
    import time

    for i in range(4):
        folder = tmp_path / f"cache{i}"
        at = str(time.time() + 0.6)
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN_AT, str(folder), at],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=30) for p in procs]
        assert [o.strip() for o, _ in outs] == ["True", "True"], outs


def test_what_a_ranks_cache_knows_never_crosses_the_job(tmp_path: Path) -> None:
    """A second verify: each rank's cache answers for its own files; only misses are sent."""
    from tests.conftest import settle

    files = []
    for i in range(6):
        files.append(tmp_path / f"{i}.txt")
        files[-1].write_text(f"file {i}\n" * (i + 1), "utf-8")
    settle(*files)  # not racy: hashed files are cached
    caches = [StatCache(tmp_path / f"cache{r}") for r in (0, 1)]
    comms: list[Any] = [None, None]

    def rank(comm: ThreadComm) -> Any:
        comms[comm.rank] = comm
        return shard.hash_files(comm, files, cache=caches[comm.rank])

    first = on_ranks([rank, rank])
    mine0 = {str(p) for p, r in zip(files, _owner(files), strict=True) if r == 0}
    for c in caches:
        c.flush()
    hash_files(files[:2], cache=caches[1])  # rank 1 now also knows 0 and 1
    caches[1].flush()
    (tmp_path / "0.txt").write_text("changed\n", "utf-8")  # and rank 0's entry is stale
    second = on_ranks([rank, rank])
    expected = hash_files(files, use_cache=False)
    for result in second:
        same(expected, result)
    assert first[0][files[1]] == second[0][files[1]]
    sent = [[k[6] for k in c.sent[-2]["keys"] if k] for c in comms]  # the keys of the second run
    # each rank sends what the other read in the first run and the changed file,
    # less what it has hashed itself since (rank 1: files 0 and 1)
    changed = {str(files[0])}
    assert set(sent[0]) == ({str(p) for p in files} - mine0) | changed
    assert set(sent[1]) == (mine0 - {str(files[1])}) | changed


def _owner(files: list[Path]) -> list[int]:
    node = shard.node_name(0)
    keys = [shard.file_key(p, node) for p in files]
    owner = assign([keys, keys])
    return [owner[k] for k in keys]  # type: ignore[index]


# --- scan over ranks (ftmanifest.distributed.scan) ---------------------------


def _scan_folder(root: Path, extra: str = "") -> None:
    ghp = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"
    for i in range(10):
        (root / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        text = "".join(f"row {n}\n" for n in range(i * 7))
        if i in (2, 7):
            text += f"token {ghp}\nmail jane.doe@example.org\n"
        (root / f"d{i % 3}" / f"{i}.txt").write_text(text + extra if i == 4 else text, "utf-8")
    (root / "d0" / "blob.dat").write_bytes(bytes(range(256)))
    os.mkfifo(root / "d1" / "pipe")


@pytest.mark.parametrize("nodes", [[0, 0], [0, 1]])
def test_scan_over_ranks_is_each_ranks_single_process_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: list[int]
) -> None:
    """Same folder (split), or each node its own copy with one more secret on rank 1."""
    from ftmanifest.distributed.scan import scan_distributed
    from ftmanifest.scan.cache import scan_cached

    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    _scan_folder(tmp_path / "a")
    _scan_folder(tmp_path / "b", extra="token ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp\n")
    roots = [tmp_path / "a", tmp_path / ("a" if nodes == [0, 0] else "b")]
    # a folder named twice: its files are listed (and reported) twice
    paths = [[r, r / "d1"] for r in roots]

    def rank(comm: ThreadComm) -> Any:
        return scan_distributed(comm, paths[comm.rank], use_cache=comm.rank == 0)

    results = on_ranks([rank, rank], nodes=nodes)
    for r, result in enumerate(results):
        assert not isinstance(result, BaseException), result
        single = scan_cached(paths[r], use_cache=False)
        assert result.findings == single.findings
        assert result.files == single.files
        assert result.bytes_scanned == single.bytes_scanned
    where = [Path(f.path or "").name for f in results[1].findings]
    assert ("4.txt" in where) == (nodes == [0, 1]), where  # rank 1's own copy differs


def test_a_file_listed_twice_has_the_same_line_numbers_both_times(tmp_path: Path) -> None:
    """The engine stitched ranges by path: the second listing counted on from the first."""
    from ftmanifest.scan.engine import scan_paths

    _scan_folder(tmp_path)
    found = scan_paths([tmp_path / "d1", tmp_path / "d1"]).findings
    lines = [f.line for f in found if f.rule == "secret.github-pat"]
    assert lines == [50, 50], lines


def test_a_rank_whose_path_is_missing_still_takes_part_in_the_scan(tmp_path: Path) -> None:
    from ftmanifest.distributed.scan import scan_distributed
    from ftmanifest.errors import InputNotFoundError

    _scan_folder(tmp_path / "a")
    paths = [[tmp_path / "a"], [tmp_path / "missing"]]
    results = on_ranks([lambda c: scan_distributed(c, paths[c.rank], use_cache=False)] * 2)
    assert isinstance(results[1], InputNotFoundError), results[1]
    assert not isinstance(results[0], BaseException), results[0]  # rank 0 scanned it all
    assert len(results[0].files) == 11
