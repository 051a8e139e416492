"""Tests for ftmanifest.hashing and ftmanifest.progress, on real files."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftmanifest.hashing as hashing
from ftmanifest.counts import RecordCountError
from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.hashing import (
    CHUNK_SIZE,
    FileChangedError,
    FileDigest,
    SymlinkEscapeError,
    UnreadableFileError,
    hash_file,
    hash_files,
    hash_tree,
    list_tree,
    tree_digest,
)
from ftmanifest.progress import Progress, render_line
from ftmanifest.statcache import RACY_NS, StatCache
from tests.conftest import settle, within

EMPTY_SHA256 = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
HOUR_NS = 3600 * 10**9


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write(path: Path, data: bytes, *, old: bool = True) -> Path:
    """Write ``data``; ``old`` puts mtime an hour back so the cache may keep it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if old:
        t = time.time_ns() - HOUR_NS
        os.utime(path, ns=(t, t))
    return path


class Hook:
    """A progress sink that runs ``action`` once, after the first chunk is read."""

    def __init__(self, action=None) -> None:  # type: ignore[no-untyped-def]
        self.action = action
        self.total = 0
        self.done = 0

    def add_total(self, nbytes: int) -> None:
        self.total += nbytes

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        if self.action is not None:
            action, self.action = self.action, None
            action()


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


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_permission_denied_is_an_input_error(tmp_path: Path) -> None:
    p = write(tmp_path / "secret", b"s")
    p.chmod(0)
    with pytest.raises(UnreadableFileError) as info:
        hash_file(p)
    assert info.value.path == str(p)


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
    monkeypatch.setattr(hashing, "_cpus", lambda: 4)
    p = write(tmp_path / "f", os.urandom(2 * CHUNK_SIZE + 5))
    cache = StatCache(tmp_path / "c")
    with pytest.raises(FileChangedError) as info:
        hash_file(p, cache=cache, progress=Hook(lambda: action(p)), count=count)
    assert isinstance(info.value, InputError) and info.value.path == str(p)
    cache.flush()
    assert cache.stored == cache.records_stored == 0


# --- trees --------------------------------------------------------------------


def test_tree_digest_follows_the_documented_encoding() -> None:
    files = {"b.txt": sha(b"b"), "a/x.bin": sha(b"x"), "a-b": sha(b"")}
    # '-' (0x2d) sorts before '/' (0x2f): flat byte order, not per-folder order.
    want = b"".join(f"{k}\0{files[k]}\n".encode() for k in ["a-b", "a/x.bin", "b.txt"])
    assert tree_digest(files) == sha(want)
    assert tree_digest({}) == EMPTY_SHA256


def test_tree_digest_sorts_by_utf8_bytes() -> None:
    files = {"\uff41": sha(b"1"), "\U0001f600": sha(b"2"), "z": sha(b"3")}
    order = sorted(files, key=lambda k: k.encode("utf-8"))
    want = b"".join(k.encode() + b"\0" + files[k].encode() + b"\n" for k in order)
    assert tree_digest(files) == sha(want)


@pytest.mark.parametrize("rel", ["", "/abs", "a//b", "a/", "./a", "a/../b", "nul\0"])
def test_tree_digest_refuses_bad_paths(rel: str) -> None:
    with pytest.raises(InputError):
        tree_digest({rel: EMPTY_SHA256})


@pytest.mark.parametrize("digest", ["", "e3b0", "sha256:XYZ", "sha256:ab\n", "SHA256:ab"])
def test_tree_digest_refuses_bad_digests(digest: str) -> None:
    with pytest.raises(InputError):
        tree_digest({"a": digest})


_names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1
)
_rel = st.lists(_names.filter(lambda s: s not in (".", "..")), min_size=1, max_size=3).map("/".join)
_dig = st.binary(max_size=8).map(sha)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_rel, _dig, min_size=1, max_size=8), st.randoms())
def test_tree_digest_properties(files: dict[str, str], rnd) -> None:  # type: ignore[no-untyped-def]
    items = list(files.items())
    rnd.shuffle(items)
    base = tree_digest(files)
    assert tree_digest(dict(items)) == base  # insertion order does not matter
    key = items[0][0]
    assert tree_digest({**files, key: sha(files[key].encode())}) != base  # content counts
    renamed = {(k + "_" if k == key else k): v for k, v in files.items()}
    if len(renamed) == len(files):
        assert tree_digest(renamed) != base  # names count


def _make_tree(root: Path, order: list[str]) -> None:
    for name in order:
        write(root / name, name.encode())


def test_hash_tree_independent_of_creation_order_and_sensitive_to_changes(tmp_path: Path) -> None:
    names = ["b", "a/c", "a/b/d", "a-e", "z.bin"]
    _make_tree(tmp_path / "one", names)
    _make_tree(tmp_path / "two", list(reversed(names)))
    one, two = hash_tree(tmp_path / "one"), hash_tree(tmp_path / "two")
    assert one == two
    assert list(one.files) == ["a-e", "a/b/d", "a/c", "b", "z.bin"]
    assert one.digest == tree_digest({k: v.digest for k, v in one.files.items()})

    (tmp_path / "two" / "b").rename(tmp_path / "two" / "b2")
    renamed = hash_tree(tmp_path / "two")
    assert renamed.digest != one.digest
    (tmp_path / "two" / "b2").rename(tmp_path / "two" / "b")
    assert hash_tree(tmp_path / "two").digest == one.digest
    write(tmp_path / "two" / "a" / "c", b"a/C")  # one byte
    assert hash_tree(tmp_path / "two").digest != one.digest


def test_hash_tree_skips_git_and_empty_folders(tmp_path: Path) -> None:
    write(tmp_path / "f", b"f")
    write(tmp_path / ".git" / "HEAD", b"ref")
    write(tmp_path / "sub" / ".git", b"gitdir: elsewhere")
    (tmp_path / "empty").mkdir()
    assert list(hash_tree(tmp_path).files) == ["f"]


def test_hash_tree_errors(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError):
        hash_tree(tmp_path / "nope")
    with pytest.raises(InputError):
        hash_tree(write(tmp_path / "file", b""))


@pytest.mark.skipif(sys.platform != "linux", reason="needs non-UTF-8 file names")
def test_non_utf8_name_is_refused(tmp_path: Path) -> None:
    os.close(os.open(os.fsencode(tmp_path) + b"/bad\xff", os.O_CREAT | os.O_WRONLY))
    with pytest.raises(InputError, match="UTF-8"):
        list_tree(tmp_path)


def test_symlink_escaping_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "top"
    secret = write(tmp_path / "outside" / "secret", b"s")
    write(root / "ok", b"ok")
    (root / "link").symlink_to(secret)
    with pytest.raises(SymlinkEscapeError) as info:
        hash_tree(root)
    assert info.value.path == str(root / "link") and info.value.observed == str(secret)
    (root / "link").unlink()
    (root / "dirlink").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(SymlinkEscapeError):
        list_tree(root)
    (root / "dirlink").unlink()
    (root / "rel").symlink_to("../top/../outside/secret")  # '..' tricks resolve outside too
    with pytest.raises(SymlinkEscapeError):
        list_tree(root)


def test_symlinks_inside_root_are_hashed_under_their_own_name(tmp_path: Path) -> None:
    write(tmp_path / "data" / "x", b"x")
    (tmp_path / "alias").symlink_to("data/x")
    (tmp_path / "view").symlink_to("data", target_is_directory=True)
    result = hash_tree(tmp_path)
    assert list(result.files) == ["alias", "data/x", "view/x"]
    assert {fd.digest for fd in result.files.values()} == {sha(b"x")}


def test_symlink_loop_and_broken_link_are_errors(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to("..", target_is_directory=True)
    with pytest.raises(InputError, match="^symlink loop at "):
        list_tree(tmp_path)
    (tmp_path / "sub" / "up").unlink()
    (tmp_path / "dangling").symlink_to("nothing")
    with pytest.raises(InputNotFoundError):
        list_tree(tmp_path)


def test_hub_cache_snapshot_with_symlink_root(tmp_path: Path) -> None:
    repo = tmp_path / "models--org--tiny"
    write(repo / "blobs" / "abc", b"weights")
    snap = repo / "snapshots" / "0123"
    snap.mkdir(parents=True)
    (snap / "model.safetensors").symlink_to("../../blobs/abc")
    with pytest.raises(SymlinkEscapeError):
        hash_tree(snap)
    result = hash_tree(snap, symlink_root=repo)
    assert result.files == {"model.safetensors": FileDigest(sha(b"weights"), 7)}


# --- progress -----------------------------------------------------------------


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_only_on_a_tty_after_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    now = [0.0]
    tty = FakeTTY()
    bar = Progress(stream=tty, delay=1.0, clock=lambda: now[0])
    bar.add_total(4 << 20)
    bar.advance(1 << 20)
    assert tty.getvalue() == ""  # quick work stays silent
    now[0] = 2.0
    bar.advance(1 << 20)
    assert tty.getvalue().startswith("\rhashing  2.0 MiB / 4.0 MiB   50%  1.0 MiB/s  ETA 2s")
    bar.close()
    assert tty.getvalue().endswith("\r")

    pipe = io.StringIO()
    quiet = Progress(stream=pipe, delay=0.0)
    quiet.add_total(10)
    quiet.advance(10)
    quiet.close()
    assert pipe.getvalue() == "" and quiet.done == 10


def test_render_line_without_total() -> None:
    assert render_line("hashing", 0, 0, 0.0) == "hashing  0 B / 0 B  0 B/s"


def test_progress_counts_bytes_from_parallel_workers(tmp_path: Path) -> None:
    paths = [write(tmp_path / f"f{i}", os.urandom(CHUNK_SIZE + i)) for i in range(4)]
    bar = Progress(stream=io.StringIO())
    hash_files(paths, workers=4, progress=bar, use_cache=False)
    assert bar.done == bar.total == sum(p.stat().st_size for p in paths)


# --- special files: listed, reported by kind, never opened ----------------------


def _refused(root: Path, name: str, kind: str, **kw: object) -> None:
    """``name`` is listed, ``hash_tree`` raises naming its kind, nothing blocks."""
    listing = within(10, lambda: list_tree(root, **kw))  # type: ignore[arg-type]
    assert name in listing  # type: ignore[operator]
    with pytest.raises(UnreadableFileError) as info:
        within(10, lambda: hash_tree(root, **kw))  # type: ignore[arg-type]
    assert info.value.message == f"not a regular file: {root / name} ({kind})"
    assert info.value.path == str(root / name) and info.value.observed == kind


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_in_a_folder_is_an_error_not_skipped(tmp_path: Path) -> None:
    write(tmp_path / "f", b"f")
    os.mkfifo(tmp_path / "pipe")
    _refused(tmp_path, "pipe", "FIFO")
    results = within(10, lambda: hash_files(list_tree(tmp_path).values()))
    assert isinstance(results, dict) and results[tmp_path / "f"] == FileDigest(sha(b"f"), 1)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_symlink_to_a_fifo_is_an_error(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "link.jsonl").symlink_to("../pipe")
    _refused(tmp_path / "data", "link.jsonl", "FIFO", symlink_root=tmp_path)


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs unix sockets")
def test_unix_socket_in_a_folder_is_an_error(tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(tmp_path / "sock"))
        _refused(tmp_path, "sock", "socket")


@pytest.mark.skipif(sys.platform != "linux", reason="uses /dev/null")
def test_link_to_a_character_device_inside_the_boundary(tmp_path: Path) -> None:
    (tmp_path / "null").symlink_to("/dev/null")
    with pytest.raises(SymlinkEscapeError):  # the usual boundary: the folder itself
        list_tree(tmp_path)
    _refused(tmp_path, "null", "character device", symlink_root="/")


@pytest.mark.parametrize(
    ("mode", "device", "kind"),
    [(stat.S_IFCHR, (1, 3), "character device"), (stat.S_IFBLK, (7, 0), "block device")],
)
def test_device_nodes_in_a_folder_are_errors(
    tmp_path: Path, mode: int, device: tuple[int, int], kind: str
) -> None:
    try:
        os.mknod(tmp_path / "dev", mode | 0o600, os.makedev(*device))
    except (AttributeError, PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a {kind} here (needs CAP_MKNOD): {exc}")
    _refused(tmp_path, "dev", kind)


# --- record counts, in the same read ----------------------------------------------


def old_lines(data: bytes) -> int:
    return sum(1 for line in io.BytesIO(data) if line.strip())


def jsonl(n: int, *, blank_every: int = 0) -> bytes:
    lines = []
    for i in range(n):
        lines.append(b'{"i": %d, "text": "%s"}\n' % (i, b"w" * (i % 300)))
        if blank_every and i % blank_every == 0:
            lines.append(b"  \r\n")
    return b"".join(lines)


@pytest.mark.parametrize("cpus", [1, 4])  # 4: the hash runs on a helper thread
def test_count_in_the_same_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpus: int) -> None:
    monkeypatch.setattr(hashing, "_cpus", lambda: cpus)
    data = jsonl(30_000, blank_every=997) + b'{"last": "no newline"}'
    assert len(data) > 3 * CHUNK_SIZE
    p = write(tmp_path / "d.jsonl", data)
    hook = Hook()
    result = hash_file(p, count="jsonl", use_cache=False, progress=hook)
    assert result == FileDigest(sha(data), len(data), old_lines(data))
    assert hook.done == len(data)  # one read, not two
    assert hash_file(p, use_cache=False).records is None


def test_count_per_path_and_formats_without_a_count(tmp_path: Path) -> None:
    a = write(tmp_path / "a.jsonl", b"1\n\n2\n")
    b = write(tmp_path / "b.csv", b'h\n1,"x\ny"\n2,z\n')
    c = write(tmp_path / "c.bin", b"\x00\n")
    d = write(tmp_path / "d.jsonl", b"x\n")
    results = hash_files([a, b, c, d], count={a: "jsonl", b: "csv", c: "bin"}, use_cache=False)
    assert [r.records for r in results.values()] == [2, 2, None, None]  # type: ignore[union-attr]


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


def test_hash_tree_counts_records(tmp_path: Path) -> None:
    root = tmp_path / "data"  # not tmp_path: the stat cache lives in tmp_path/cache
    write(root / "a.jsonl", b"1\n2\n")
    write(root / "sub" / "b.jsonl", b"3\n\n")
    tree = hash_tree(root, count="jsonl")
    assert [f.records for f in tree.files.values()] == [2, 1] and tree.records == 3
    assert hash_tree(root).records is None
    assert hash_tree(root, count="bin").records is None
    plain = hash_tree(root)
    assert plain.digest == tree.digest and plain.files["a.jsonl"].records is None


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
