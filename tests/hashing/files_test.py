"""``ftmanifest.hashing.files``: many files in parallel, the stat cache, settle."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

from ftmanifest import statcache
from ftmanifest.errors import InputNotFoundError
from ftmanifest.hashing.digests import (
    FileDigest,
    UnreadableFileError,
)
from ftmanifest.hashing.files import hash_file, hash_files
from ftmanifest.hashing.read import CHUNK_SIZE
from ftmanifest.progress import Progress
from ftmanifest.statcache import RACY_NS, StatCache
from tests.conftest import settle, within
from tests.hashing.conftest import HOUR_NS, Hook, jsonl, sha, write


def test_parallel_and_serial_agree_with_hashlib(tmp_path: Path) -> None:
    blobs = {tmp_path / f"f{i}": os.urandom(i * 37_111) for i in range(12)}
    for p, data in blobs.items():
        write(p, data)
    serial = hash_files(blobs, workers=1, use_cache=False)
    parallel = hash_files(blobs, workers=4, use_cache=False)
    assert serial == parallel == {p: FileDigest(sha(d), len(d)) for p, d in blobs.items()}
    assert list(parallel) == list(blobs)  # input order kept


def test_batch_returns_every_error_without_stopping(tmp_path: Path) -> None:
    good = write(tmp_path / "good", b"x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    results = within(
        10, lambda: hash_files([tmp_path / "missing", tmp_path, fifo, good], workers=2)
    )
    missing, folder, pipe, ok = results.values()  # type: ignore[attr-defined]
    assert isinstance(missing, InputNotFoundError) and missing.path == str(tmp_path / "missing")
    assert isinstance(folder, UnreadableFileError) and folder.path == str(tmp_path)
    assert folder.message.endswith("(directory)")
    assert isinstance(pipe, UnreadableFileError)  # and we did not block opening it
    assert pipe.message == f"not a regular file: {fifo} (FIFO)" and pipe.observed == "FIFO"
    assert ok == FileDigest(sha(b"x"), 1)
    with pytest.raises(InputNotFoundError):
        hash_file(tmp_path / "missing")


# --- the stat cache, through the hashing engine -------------------------------


def test_cache_hit_reads_nothing(tmp_path: Path) -> None:
    p = write(tmp_path / "f", os.urandom(3 * CHUNK_SIZE))
    settle(p)
    cache = StatCache(tmp_path / "c")
    first, second = Hook(), Hook()
    assert hash_file(p, cache=cache, progress=first).digest == sha(p.read_bytes())
    assert first.done == 3 * CHUNK_SIZE and cache.stored == 1
    assert hash_file(p, cache=cache, progress=second).digest == sha(p.read_bytes())
    assert (second.done, second.total, cache.hits) == (0, 0, 1)


def test_fresh_file_is_not_cached_while_racy(tmp_path: Path) -> None:
    p = write(tmp_path / "f", b"new", old=False)
    cache = StatCache(tmp_path / "c")
    hash_file(p, cache=cache)
    assert (cache.stored, cache.racy) == (0, 1)
    hook = Hook()
    hash_file(p, cache=cache, progress=hook)
    assert hook.done == 3  # read again: a same-tick rewrite would have been invisible


@pytest.mark.parametrize("change", ["size", "mtime", "ctime"])
def test_cache_invalidated_by_stat_change(tmp_path: Path, change: str) -> None:
    p = write(tmp_path / "f", b"aaaa")
    cache = StatCache(tmp_path / "c")
    hash_file(p, cache=cache)
    time.sleep(0.02)  # let ctime move past a coarse timestamp tick
    if change == "size":
        write(p, b"aaaab")
    elif change == "mtime":
        t = time.time_ns() - 2 * HOUR_NS
        os.utime(p, ns=(t, t))
    else:  # in-place edit with mtime put back: only ctime tells
        st = p.stat()
        write(p, b"bbbb", old=False)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    hook = Hook()
    assert hash_file(p, cache=cache, progress=hook).digest == sha(p.read_bytes())
    assert hook.done == p.stat().st_size and cache.hits == 0


def test_use_cache_false_rehashes_and_leaves_cache_alone(tmp_path: Path) -> None:
    p = write(tmp_path / "f", b"abc")
    settle(p)
    cache = StatCache(tmp_path / "c")
    hash_file(p, cache=cache)
    hook = Hook()
    assert hash_file(p, use_cache=False, cache=cache, progress=hook).digest == sha(b"abc")
    assert hook.done == 3 and (cache.hits, cache.stored) == (0, 1)


def test_default_cache_lives_in_the_cache_dir(tmp_path: Path) -> None:
    p = write(tmp_path / "f", b"abc")
    settle(p)
    hash_file(p)
    assert (tmp_path / "cache" / "statcache-v1.sqlite3").is_file()
    hook = Hook()
    hash_file(p, progress=hook)
    assert hook.done == 0


def test_progress_counts_bytes_from_parallel_workers(tmp_path: Path) -> None:
    paths = [write(tmp_path / f"f{i}", os.urandom(CHUNK_SIZE + i)) for i in range(4)]
    bar = Progress(stream=io.StringIO())
    hash_files(paths, workers=4, progress=bar, use_cache=False)
    assert bar.done == bar.total == sum(p.stat().st_size for p in paths)


def test_count_per_path_and_formats_without_a_count(tmp_path: Path) -> None:
    a = write(tmp_path / "a.jsonl", b"1\n\n2\n")
    b = write(tmp_path / "b.csv", b'h\n1,"x\ny"\n2,z\n')
    c = write(tmp_path / "c.bin", b"\x00\n")
    d = write(tmp_path / "d.jsonl", b"x\n")
    results = hash_files([a, b, c, d], count={a: "jsonl", b: "csv", c: "bin"}, use_cache=False)
    assert [r.records for r in results.values()] == [2, 2, None, None]  # type: ignore[union-attr]


def test_cached_count_reads_nothing_and_a_missing_one_rereads(tmp_path: Path) -> None:
    data = jsonl(2_000)
    p = write(tmp_path / "d.jsonl", data)
    settle(p)
    cache = StatCache(tmp_path / "c")
    hash_file(p, cache=cache)  # digest cached, no count
    again = Hook()
    assert hash_file(p, cache=cache, count="jsonl", progress=again).records == 2_000
    assert again.done == len(data)  # a digest without the count asked for: read again
    for fmt, want in [("jsonl", 2_000), (None, None)]:
        hook = Hook()
        assert hash_file(p, cache=cache, count=fmt, progress=hook).records == want
        assert hook.done == 0
    csv_hook = Hook()
    assert hash_file(p, cache=cache, count="csv", progress=csv_hook).records == 1_999
    assert csv_hook.done == len(data)  # another format, another count


def test_count_of_a_racy_file_is_cached_by_content(tmp_path: Path) -> None:
    p = write(tmp_path / "d.jsonl", b"1\n2\n", old=False)
    cache = StatCache(tmp_path / "c")
    assert hash_file(p, cache=cache, count="jsonl").records == 2
    cache.flush()
    assert (cache.stored, cache.racy, cache.records_stored) == (0, 1, 1)
    assert cache.lookup_records([(sha(b"1\n2\n"), "lines/1")]) == {(sha(b"1\n2\n"), "lines/1"): 2}


# --- settle: fresh files are cached, so the next run reads nothing ---------------


def test_settle_waits_out_the_racy_window_once(tmp_path: Path) -> None:
    old = [write(tmp_path / f"old{i}", b"o%d" % i) for i in range(3)]
    fresh = [write(tmp_path / f"new{i}", b"n%d" % i, old=False) for i in range(3)]
    cache = StatCache(tmp_path / "c")
    started = time.monotonic()
    results = hash_files(old + fresh, cache=cache, settle=True, count="txt")
    waited = time.monotonic() - started
    assert all(isinstance(r, FileDigest) for r in results.values())
    cache.flush()
    assert (cache.stored, cache.racy) == (6, 0)
    assert waited < RACY_NS / 1e9 + 1.5  # one wait for all, not one per file
    hook = Hook()
    again = hash_files(old + fresh, cache=StatCache(tmp_path / "c"), progress=hook, count="txt")
    assert hook.done == 0 and again == results


@pytest.mark.parametrize(
    ("min_files", "min_bytes", "cached"),
    [(2_500, 256 << 20, 0), (3, 256 << 20, 3), (2_500, 6, 3)],
    ids=["the-tools-thresholds-read-them-again", "three-files-are-worth-it", "six-bytes-are"],
)
def test_settle_waits_only_when_reading_again_would_cost_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, min_files: int, min_bytes: int, cached: int
) -> None:
    """Three fresh files of two bytes: with the tool's thresholds they are hashed at once,
    not cached, and the next run reads them again; past a threshold they are waited for."""
    monkeypatch.setattr(statcache, "SETTLE_MIN_FILES", min_files)
    monkeypatch.setattr(statcache, "SETTLE_MIN_BYTES", min_bytes)
    fresh = [write(tmp_path / f"new{i}", b"n%d" % i, old=False) for i in range(3)]
    cache = StatCache(tmp_path / "c")
    results = hash_files(fresh, cache=cache, settle=True)
    cache.flush()
    assert (cache.stored, cache.racy) == (cached, 3 - cached)
    hook = Hook()
    again = hash_files(fresh, cache=StatCache(tmp_path / "c"), progress=hook)
    assert again == results and hook.done == (0 if cached else 6)


@pytest.mark.parametrize("waited", [False, True], ids=["not-worth-the-wait", "waited-for"])
def test_a_fresh_file_rewritten_with_its_mtime_put_back_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, waited: bool
) -> None:
    """Attack on settling less: lock hashes a fresh file without waiting, then the file
    gets other bytes of the same size and its old mtime.  The next hash must read it,
    as it must after a wait (control)."""
    if not waited:
        monkeypatch.setattr(statcache, "SETTLE_MIN_FILES", 2_500)
        monkeypatch.setattr(statcache, "SETTLE_MIN_BYTES", 256 << 20)
    p = write(tmp_path / "f", b"aaaa", old=False)
    before = p.stat()
    with StatCache(tmp_path / "c") as cache:
        assert hash_files([p], cache=cache, settle=True)[p] == FileDigest(sha(b"aaaa"), 4)
    p.write_bytes(b"bbbb")
    os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
    with StatCache(tmp_path / "c") as cache:
        assert hash_files([p], cache=cache)[p] == FileDigest(sha(b"bbbb"), 4)


def test_settle_gives_up_on_a_future_mtime(tmp_path: Path) -> None:
    p = write(tmp_path / "f", b"x", old=False)
    future = time.time_ns() + 3600 * 10**9
    os.utime(p, ns=(future, future))
    cache = StatCache(tmp_path / "c")
    started = time.monotonic()
    assert hash_file(p, cache=cache, settle=True).digest == sha(b"x")
    assert time.monotonic() - started < RACY_NS / 1e9 + 1.5
    cache.flush()
    assert (cache.stored, cache.racy) == (0, 1)  # still not trusted
