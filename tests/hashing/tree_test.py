"""``ftmanifest.hashing.tree``: ``hash_tree`` over a walk; symlinks judged against
the boundary; special files listed and refused, never opened."""

from __future__ import annotations

import os
import socket
import stat
import sys
from pathlib import Path

import pytest

import ftmanifest.hashing.forked as hashing_forked
from ftmanifest import statcache
from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.hashing.digests import (
    FileDigest,
    SymlinkEscapeError,
    UnreadableFileError,
    tree_digest,
)
from ftmanifest.hashing.files import hash_files
from ftmanifest.hashing.listing import Ahead
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.hashing.walk import list_tree, walk_tree
from ftmanifest.statcache import StatCache
from tests.conftest import within
from tests.hashing.conftest import sha, write


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


@pytest.mark.parametrize("way", ["read-after-the-walk", "read-during-the-walk", "forked"])
@pytest.mark.parametrize("worth", [False, True], ids=["small-read-again", "worth-the-wait"])
def test_settle_waits_for_a_trees_fresh_files_only_when_worth_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str, worth: bool
) -> None:
    """Six fresh files of two bytes: under the tool's thresholds ``settle`` hashes them at
    once and the next run reads them again (a miss each); worth the wait, none is read."""
    if not worth:
        monkeypatch.setattr(statcache, "SETTLE_MIN_FILES", 2_500)
        monkeypatch.setattr(statcache, "SETTLE_MIN_BYTES", 256 << 20)
        # fresh for the whole test: with the suite's 0.2 s window, a first pass slower
        # than that on a loaded machine cached the files it had called fresh (misses 0)
        monkeypatch.setattr(statcache, "RACY_NS", 60 * 10**9)
    if way == "forked":
        if sys.platform != "linux":
            pytest.skip("worker processes read small files on Linux only")
        monkeypatch.setattr(hashing_forked, "FORK_MIN", 2)
    root = tmp_path / "t"
    for i in range(6):
        write(root / f"p{i}.jsonl", b"%d\n" % i, old=False)
    walked = walk_tree(root, read=Ahead()) if way == "read-during-the-walk" else None
    with StatCache(tmp_path / "c") as cache:
        first = hash_tree(root, cache=cache, walked=walked, settle=True, workers=2)
    with StatCache(tmp_path / "c") as cache:
        again = hash_tree(root, cache=cache)
        assert cache.misses == (0 if worth else 6)
    assert again.digest == first.digest
