"""``ftmanifest.hashing.read``: one file into its digest and count, through ``hash_file``;
a file that changes while it is read is an error and never cached."""

from __future__ import annotations

import io
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ftmanifest.hashing.cpus as hashing_cpus
import ftmanifest.hashing.files as hashing_files
from ftmanifest.counts import RecordCountError
from ftmanifest.errors import InputError
from ftmanifest.hashing.digests import (
    FileChangedError,
    FileDigest,
    UnreadableFileError,
)
from ftmanifest.hashing.files import hash_file, hash_files
from ftmanifest.hashing.read import CHUNK_SIZE
from ftmanifest.statcache import StatCache
from tests.hashing.conftest import EMPTY_SHA256, HOUR_NS, Hook, jsonl, sha, write

# --- single files -------------------------------------------------------------


def test_empty_file_has_the_known_sha256(tmp_path: Path) -> None:
    assert hash_file(write(tmp_path / "e", b"")) == FileDigest(EMPTY_SHA256, 0)


@pytest.mark.parametrize(
    "size", [1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 7]
)
def test_digest_matches_hashlib_across_chunk_boundaries(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    result = hash_file(write(tmp_path / "f", data), use_cache=False)
    assert result == FileDigest(sha(data), size)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", result.digest)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_permission_denied_is_an_input_error(tmp_path: Path) -> None:
    p = write(tmp_path / "secret", b"s")
    p.chmod(0)
    with pytest.raises(UnreadableFileError) as info:
        hash_file(p)
    assert info.value.path == str(p)


# --- files changing under us --------------------------------------------------


def _grow(p: Path) -> None:
    with p.open("ab") as f:
        f.write(b"more")
    t = time.time_ns() - HOUR_NS
    os.utime(p, ns=(t, t))


def _rewrite_keeping_mtime(p: Path) -> None:
    st = p.stat()
    time.sleep(0.02)
    with p.open("r+b") as f:
        f.write(b"X")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def _replace(p: Path) -> None:
    write(p.with_name("new"), p.read_bytes()).replace(p)


@pytest.mark.parametrize("count", [None, "jsonl"])  # jsonl: counted, hashed on a helper thread
@pytest.mark.parametrize("action", [_grow, _rewrite_keeping_mtime, _replace, Path.unlink])
def test_change_during_hashing_is_detected_and_never_cached(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    action: Callable[[Path], object],
    count: str | None,
) -> None:
    for module in (hashing_cpus, hashing_files):  # its lookups
        monkeypatch.setattr(module, "_cpus", lambda: 4)
    p = write(tmp_path / "f", os.urandom(2 * CHUNK_SIZE + 5))
    cache = StatCache(tmp_path / "c")
    with pytest.raises(FileChangedError) as info:
        hash_file(p, cache=cache, progress=Hook(lambda: action(p)), count=count)
    assert isinstance(info.value, InputError) and info.value.path == str(p)
    cache.flush()
    assert cache.stored == cache.records_stored == 0


# --- record counts, in the same read ----------------------------------------------


def old_lines(data: bytes) -> int:
    return sum(1 for line in io.BytesIO(data) if line.strip())


@pytest.mark.parametrize("cpus", [1, 4])  # 4: the hash runs on a helper thread
def test_count_in_the_same_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpus: int) -> None:
    for module in (hashing_cpus, hashing_files):  # its lookups
        monkeypatch.setattr(module, "_cpus", lambda: cpus)
    data = jsonl(30_000, blank_every=997) + b'{"last": "no newline"}'
    assert len(data) > 3 * CHUNK_SIZE
    p = write(tmp_path / "d.jsonl", data)
    hook = Hook()
    result = hash_file(p, count="jsonl", use_cache=False, progress=hook)
    assert result == FileDigest(sha(data), len(data), old_lines(data))
    assert hook.done == len(data)  # one read, not two
    assert hash_file(p, use_cache=False).records is None


def test_json_and_parquet_are_counted_after_the_hash(tmp_path: Path) -> None:
    p = write(tmp_path / "d.json", json.dumps([1, 2, 3]).encode())
    assert hash_file(p, count="json").records == 3
    bad = write(tmp_path / "bad.json", b"[1, 2")
    result = hash_files([bad], count="json")[bad]
    assert isinstance(result, RecordCountError) and result.path == str(bad)
    assert result.digest == FileDigest(sha(b"[1, 2"), 5)  # the digest is not lost
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"x": list(range(5))}), tmp_path / "t.parquet")
    assert hash_file(tmp_path / "t.parquet", count="parquet").records == 5
