"""Tests for ftmanifest.statcache: location, safety, concurrency, failure modes."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import ftmanifest.hashing.files as hashing_files
from ftmanifest.hashing.digests import FileDigest, tree_digest
from ftmanifest.hashing.files import hash_files
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.statcache import (
    DB_NAME,
    FLUSH_ENTRIES,
    StatCache,
    StatKey,
    _i64,
    cache_dir,
)
from tests.conftest import CLF, TOOL_RACY_NS, settle

HOUR_NS = 3600 * 10**9
REPO = Path(__file__).resolve().parents[1]


def old_files(folder: Path, n: int, size: int = 64) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    t = time.time_ns() - HOUR_NS
    paths = []
    for i in range(n):
        p = folder / f"f{i:05d}"
        p.write_bytes(i.to_bytes(4, "big") * (size // 4))
        os.utime(p, ns=(t, t))
        paths.append(p)
    settle(*paths)
    return paths


def test_cache_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FTMANIFEST_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == tmp_path / "home" / ".cache" / "ftmanifest"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert cache_dir() == tmp_path / "home" / ".cache" / "ftmanifest"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "ftmanifest"
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"


def test_directory_created_private(tmp_path: Path) -> None:
    cache = StatCache(tmp_path / "a" / "b")
    assert cache.enabled
    assert (tmp_path / "a" / "b").stat().st_mode & 0o777 == 0o700
    cache.close()


def test_directory_writable_by_others_disables_cache(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (p,) = old_files(tmp_path / "d", 1)
    cache = StatCache(shared)
    assert not cache.enabled and "writable by another user" in caplog.text
    assert isinstance(hash_files([p], cache=cache)[p], FileDigest)
    assert not (shared / DB_NAME).exists()


def test_corrupt_cache_degrades_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "c"
    folder.mkdir(mode=0o700)
    (folder / DB_NAME).write_bytes(b"this is not a database" * 100)
    paths = old_files(tmp_path / "d", 3)
    with caplog.at_level(logging.WARNING):
        results = hash_files(paths, cache=StatCache(folder))
    assert all(isinstance(r, FileDigest) for r in results.values())
    assert "unusable" in caplog.text and str(folder / DB_NAME) in caplog.text


def test_locked_cache_degrades_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "c"
    StatCache(folder).close()  # create the database, in WAL mode
    holder = sqlite3.connect(folder / DB_NAME, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process mid-write, for ever
    try:
        cache = StatCache(folder, timeout=0.05)
        paths = old_files(tmp_path / "d", 3)
        with caplog.at_level(logging.WARNING):
            results = hash_files(paths, cache=cache)
        assert all(isinstance(r, FileDigest) for r in results.values())
        assert not cache.enabled and "locked" in caplog.text
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_entries_are_written_in_batches(tmp_path: Path) -> None:
    cache = StatCache(tmp_path / "c")
    key = StatKey(1, 2, 3, 4, 5)
    reader = sqlite3.connect(cache.path)

    def rows() -> int:
        return int(reader.execute("SELECT count(*) FROM entries").fetchone()[0])

    for i in range(FLUSH_ENTRIES - 1):
        cache.put(f"/p{i}", "sha256", key, "sha256:00", hashed_at_ns=time.time_ns())
    assert rows() == 0  # still queued: no per-file commit
    cache.put("/last", "sha256", key, "sha256:00", hashed_at_ns=time.time_ns())
    assert rows() == FLUSH_ENTRIES  # one transaction for the batch
    cache.close()
    reader.close()


def test_unsigned_64_bit_stat_fields_round_trip(tmp_path: Path) -> None:
    key = StatKey(_i64(2**64 - 1), _i64(2**63 + 5), 10, 1, 2)
    with StatCache(tmp_path / "c") as cache:
        cache.put("/p", "sha256", key, "sha256:ab", hashed_at_ns=time.time_ns())
    with StatCache(tmp_path / "c") as cache:
        assert cache.lookup("/p", "sha256", key) == "sha256:ab"
        assert cache.lookup("/p", "sha256", StatKey(key.dev, key.ino, 11, 1, 2)) is None
        assert cache.lookup("/p", "sha512", key) is None


def test_threads_share_one_cache(tmp_path: Path) -> None:
    paths = old_files(tmp_path / "d", 40)
    cache = StatCache(tmp_path / "c")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results = hash_files(paths, cache=cache, workers=2)
            assert all(isinstance(r, FileDigest) for r in results.values())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    cache.close()
    again = StatCache(tmp_path / "c")
    hash_files(paths, cache=again)
    assert again.hits == 40


_CHILD = """
import json, sys
from ftmanifest.hashing.files import hash_files
from ftmanifest.statcache import StatCache
paths = sys.argv[2:]
sys.stdin.readline()  # start together
cache = StatCache(sys.argv[1])
out = hash_files(paths, cache=cache, workers=2)
print(json.dumps({str(k): v.digest for k, v in out.items()}), cache.enabled)
"""


def test_two_processes_share_one_cache(tmp_path: Path) -> None:
    paths = old_files(tmp_path / "d", 3000, size=16)
    settle(*paths, window_ns=TOOL_RACY_NS)  # the children hash with the tool's window
    folder = tmp_path / "c"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-c", _CHILD, str(folder), *map(str, paths)]
    procs = [
        subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outs = [p.communicate("go\n", timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    digests = [json.loads(o.rsplit(" ", 1)[0]) for o in outs]
    assert digests[0] == digests[1] and len(digests[0]) == 3000
    assert all(o.rsplit(" ", 1)[1].strip() == "True" for o in outs)  # neither gave up
    with sqlite3.connect(folder / DB_NAME) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM entries").fetchone()[0] == 3000
    cache = StatCache(folder)
    hash_files(paths, cache=cache)
    assert cache.hits == 3000


# --- record counts, by content digest -----------------------------------------------


def test_record_counts_round_trip_by_digest_and_kind(tmp_path: Path) -> None:
    pairs = [(f"sha256:{i:064x}", "lines/1") for i in range(600)]  # over one query's batch
    with StatCache(tmp_path / "c") as cache:
        for i, (digest, kind) in enumerate(pairs):
            cache.put_records(digest, kind, i)
    with StatCache(tmp_path / "c") as cache:
        found = cache.lookup_records([*pairs, ("sha256:ff", "lines/1"), (pairs[0][0], "csv/1")])
        assert found == {pair: i for i, pair in enumerate(pairs)}
        assert cache.record_hits == 600


_V1_SCHEMA = """
CREATE TABLE entries (
    path TEXT NOT NULL, algo TEXT NOT NULL, dev INTEGER NOT NULL, ino INTEGER NOT NULL,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,
    digest TEXT NOT NULL, PRIMARY KEY (path, algo)
) WITHOUT ROWID
"""


def test_a_cache_written_before_record_counts_still_works(tmp_path: Path) -> None:
    """The counts table is added to an existing v1 file; its digests still hit."""
    (p,) = old_files(tmp_path / "d", 1)
    folder = tmp_path / "c"
    folder.mkdir(mode=0o700)
    digest = hash_files([p], use_cache=False)[p].digest  # type: ignore[union-attr]
    with sqlite3.connect(folder / DB_NAME) as db:
        db.execute(_V1_SCHEMA)
        row = (str(p), "sha256", *StatKey.of(p.stat()), digest)
        db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    db.close()
    cache = StatCache(folder)
    assert hash_files([p], cache=cache)[p] == FileDigest(digest, 64) and cache.hits == 1
    counted = hash_files([p], cache=cache, count="txt")[p]  # no count stored: read again
    assert counted == FileDigest(digest, 64, 1) and cache.records_stored == 1
    cache.close()
    again = StatCache(folder)
    assert hash_files([p], cache=again, count="txt")[p] == counted
    assert (again.hits, again.record_hits) == (1, 1)


# --- lock fills the cache that the first verify reads -------------------------------


def _project(root: Path) -> Path:
    """A small training folder and its manifest, every file dated an hour back."""
    files = {
        "model/config.json": '{"model_type": "llama"}\n',
        "model/model.safetensors": "w" * 4096,
        "data/train.jsonl": '{"text": "a"}\n{"text": "b"}\n',
        "data/eval.jsonl": '{"text": "e"}\n',
        "data/test.jsonl": '{"text": "t"}\n',
        "requirements.lock": "torch==2.13.0\n",
        "scripts/clean_tickets.py": "print('clean')\n",
        "scripts/chat_template.py": "print('template')\n",
        "eval/zero.jsonl": "{}\n",
        "eval/cfg.yaml": "k: 1\n",
    }
    old = time.time_ns() - HOUR_NS
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        os.utime(root / rel, ns=(old, old))
    text = CLF.read_text().replace("  repo: Qwen/Qwen2.5-0.5B-Instruct\n", "  path: model\n")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("  revision: "))
    text = (
        text.replace("data/docroute/", "data/")
        .replace("eval/baseline/zero-shot-results.jsonl", "eval/zero.jsonl")
        .replace("eval/docroute-eval-v3.yaml", "eval/cfg.yaml")
    )
    (root / "exp.yaml").write_text(text + "\n")
    settle(*(root / rel for rel in files))
    return root / "exp.yaml"


def test_first_verify_after_lock_reads_no_bytes_of_files_that_were_not_racy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ftmanifest.verify import verify_manifest
    from ftmanifest.verify.lock import lock_manifest

    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    manifest = _project(tmp_path / "repo")
    real = hashing_files._hash_one
    reads: list[Path] = []

    def spy(path: Path, *args: object) -> object:
        reads.append(path)
        return real(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(hashing_files, "_hash_one", spy)
    lock_manifest(manifest)
    assert len(reads) == 10  # lock read every pinned file once
    reads.clear()
    verify_manifest(manifest, signature=False, scan=False)
    assert reads == []


def test_the_tool_keeps_its_two_second_racy_window() -> None:
    """The suite narrows the window in its own process (tests/conftest.py); the tool's is 2 s."""
    import subprocess
    import sys

    code = "from ftmanifest.statcache import RACY_NS; print(RACY_NS)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == TOOL_RACY_NS == 2_000_000_000


def test_a_large_tree_rehashes_only_the_file_that_changed(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    for i in range(2010):
        (root / f"d{i // 500}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i // 500}" / f"f{i}.jsonl").write_text(f'{{"i": {i}}}\n')
    settle(*root.rglob("*.jsonl"))
    with StatCache(tmp_path / "c") as cache:
        first = hash_tree(root, cache=cache, count="jsonl")
    changed = root / "d1" / "f700.jsonl"
    changed.write_text('{"i": "changed"}\n{"i": 2}\n')
    settle(changed)
    with StatCache(tmp_path / "c") as cache:
        again = hash_tree(root, cache=cache, count="jsonl")
        assert cache.misses == 1 and cache.hits == 2009
    assert again.records == first.records + 1
    assert again.digest != first.digest
    assert again.digest == tree_digest({r: f.digest for r, f in again.files.items()})
    assert {r for r in first.files if first.files[r] != again.files[r]} == {"d1/f700.jsonl"}
