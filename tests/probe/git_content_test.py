"""The work tree against a commit by content, on real repositories made in tmp_path."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ftmanifest.probe import git_blobs, git_content
from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe.git_content import (
    compare_worktree,
    tracked_blobs,
    worktree_blob_id,
)
from tests.conftest import GIT_ENV, settle, within

ENV = {**os.environ, **GIT_ENV}


def _git(repo: Path, *args: str, input: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=ENV, check=True, capture_output=True, input=input
    )
    return done.stdout.decode("utf-8", "replace").strip()


def _commit(repo: Path) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "c")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "train.py").write_text("print('train')\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "empty.txt").write_bytes(b"")
    (root / "link").symlink_to("train.py")
    (root / "pkg").mkdir()
    (root / "pkg" / "m.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("out/\n")
    _commit(root)
    return root


def _changes(root: Path, **kw: object) -> dict[str, tuple[str, str]]:
    result = compare_worktree(root, _git(root, "rev-parse", "HEAD"), ctx=ProbeContext(environ=ENV),
                              **kw)  # type: ignore[arg-type]  # fmt: skip
    assert result.error is None, result.error
    return {c.path: (c.kind, c.observed) for c in result.changes}


def test_blob_ids_are_gits_own(repo: Path) -> None:
    tree = tracked_blobs(repo, _git(repo, "rev-parse", "HEAD"))
    assert set(tree) == {"train.py", "run.sh", "empty.txt", "link", "pkg/m.py", ".gitignore"}
    for rel, entry in tree.items():
        assert worktree_blob_id(repo / rel) == entry.blob, rel
    assert tree["run.sh"].mode == "100755" and tree["link"].mode == "120000"
    assert _changes(repo) == {}


def test_every_kind_of_change_is_seen(repo: Path) -> None:
    (repo / "train.py").write_text("print('other')\n")
    (repo / "pkg" / "m.py").unlink()
    (repo / "run.sh").chmod(0o644)
    (repo / "link").unlink()
    (repo / "link").symlink_to("empty.txt")
    (repo / "new.py").write_text("")
    (repo / "out").mkdir()
    (repo / "out" / "ckpt.bin").write_bytes(b"\0")  # ignored: not code
    seen = _changes(repo)
    assert {p: kind for p, (kind, _o) in seen.items()} == {
        "train.py": "modified",
        "pkg/m.py": "missing",
        "run.sh": "mode",
        "link": "modified",
        "new.py": "untracked",
    }
    assert seen["run.sh"][1].endswith("(mode 100644)")


def test_a_fifo_at_a_tracked_path_is_a_change_and_never_blocks(repo: Path) -> None:
    (repo / "train.py").unlink()
    os.mkfifo(repo / "train.py")
    seen = within(20, lambda: _changes(repo))
    assert seen["train.py"] == ("type", "a FIFO (named pipe)")


def test_a_file_in_place_of_a_symlink_with_its_text_is_a_change(repo: Path) -> None:
    (repo / "link").unlink()
    (repo / "link").write_text("train.py")  # the link's text as a file's bytes: one blob id
    assert _changes(repo)["link"][0] == "type"


def test_the_stat_cache_keeps_blob_ids_and_ctime_sees_an_mtime_put_back(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = git_blobs._read_blob_id

    def counted(path: str, fmt: str) -> tuple[str, object]:
        reads.append(path)
        return real(path, fmt)  # type: ignore[return-value]

    monkeypatch.setattr(git_blobs, "_read_blob_id", counted)
    settle(*(p for p in repo.rglob("*") if ".git" not in p.parts and p.is_file()))
    assert _changes(repo) == {} and len(reads) == 5  # a symlink's text is not cached
    reads.clear()
    assert _changes(repo) == {} and reads == []
    train = repo / "train.py"
    stamp = train.stat().st_mtime_ns
    train.write_text("print('trick')\n")  # the same size
    os.utime(train, ns=(stamp, stamp))
    assert _changes(repo)["train.py"][0] == "modified"
    assert _changes(repo, use_cache=False)["train.py"][0] == "modified"


def test_a_sha256_repository_is_compared_in_its_own_format(tmp_path: Path) -> None:
    root = tmp_path / "sha256"
    root.mkdir()
    try:
        _git(root, "init", "-q", "--object-format=sha256")
    except subprocess.CalledProcessError:
        pytest.skip("this git cannot make sha256 repositories")
    (root / "a.py").write_text("a = 1\n")
    commit = _commit(root)
    assert len(commit) == 64
    assert tracked_blobs(root, commit)["a.py"].blob == worktree_blob_id(root / "a.py", "sha256")
    assert _changes(root) == {}
    (root / "a.py").write_text("a = 2\n")
    assert _changes(root)["a.py"][0] == "modified"


def test_a_git_lfs_object_matches_its_pointer(repo: Path) -> None:
    """git-lfs checks out the object a pointer names; its bytes are what the pointer pins."""
    import hashlib

    weights = b"\x01" * 5000
    pointer = (
        "version https://git-lfs.github.com/spec/v1\n"
        f"oid sha256:{hashlib.sha256(weights).hexdigest()}\nsize {len(weights)}\n"
    )
    (repo / "big.bin").write_text(pointer)
    _commit(repo)
    (repo / "big.bin").write_bytes(weights)
    assert _changes(repo) == {}
    (repo / "big.bin").write_bytes(b"\x02" * 5000)
    assert _changes(repo)["big.bin"][0] == "modified"


def test_a_name_that_is_not_utf8_is_compared(repo: Path) -> None:
    name = os.fsdecode(b"caf\xe9.py")
    (repo / name).write_text("x = 1\n")
    _commit(repo)
    assert _changes(repo) == {}
    (repo / name).write_text("x = 2\n")
    result = compare_worktree(repo, _git(repo, "rev-parse", "HEAD"), ctx=ProbeContext(environ=ENV))
    assert [git_content.shown(c.path) for c in result.changes] == ["caf\ufffd.py"]


def test_git_failing_is_an_error_not_a_clean_tree(repo: Path) -> None:
    result = compare_worktree(repo, "f" * 40, ctx=ProbeContext(environ=ENV))
    assert result.error and result.changes == ()


def test_an_fsmonitor_hook_is_not_run(repo: Path) -> None:
    """A hook that would tell git nothing changed never speaks (nor runs)."""
    marker = repo.parent / "hook-ran"
    hook = repo.parent / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nprintf '\\0'\n")
    hook.chmod(0o755)
    _git(repo, "config", "core.fsmonitor", str(hook))
    (repo / "new.py").write_text("")
    assert "new.py" in _changes(repo)
    assert not marker.exists()
