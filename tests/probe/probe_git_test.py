"""Git commit and dirty state, on real repositories made in tmp_path."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ftmanifest.probe import git
from ftmanifest.probe._context import ProbeContext

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(
        [
            GIT,
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.org",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "train.py").write_text("print('train')\n")
    (root / ".gitignore").write_text("outputs/\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "first")
    return root


def _probe(folder: Path) -> git.GitState:
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return git.probe(ProbeContext(root=folder, environ=env))


def test_clean_repo_records_head(repo):
    state = _probe(repo)
    assert state.status == "ok" and not state.dirty
    assert state.commit == _git(repo, "rev-parse", "HEAD")
    assert len(state.commit) == 40
    assert Path(state.root).resolve() == repo.resolve()


def test_modified_tracked_file_is_dirty(repo):
    (repo / "train.py").write_text("print('changed')\n")
    state = _probe(repo)
    assert state.dirty and state.changed == 1 and state.untracked == 0


def test_untracked_file_is_dirty_but_ignored_is_not(repo):
    (repo / "outputs").mkdir()
    (repo / "outputs" / "ckpt.bin").write_bytes(b"\0")
    assert not _probe(repo).dirty
    (repo / "helper.py").write_text("x = 1\n")
    state = _probe(repo)
    assert state.dirty and state.untracked == 1


def test_subfolder_finds_the_repository(repo):
    (repo / "pkg").mkdir()
    (repo / "pkg" / "m.py").write_text("")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "pkg")
    state = _probe(repo / "pkg")
    assert state.status == "ok" and state.commit == _git(repo, "rev-parse", "HEAD")


def test_repo_without_commits(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("")
    state = _probe(tmp_path)
    assert state.status == "no-commits" and state.commit is None and state.dirty


def test_not_a_repository(tmp_path):
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(tmp_path.parent))
    state = git.probe(ProbeContext(root=tmp_path, environ=env))
    assert state.status == "not-a-repo" and state.commit is None


def test_missing_folder(tmp_path):
    assert _probe(tmp_path / "nope").status == "not-a-repo"


def test_no_git_binary(repo, tmp_path):
    env = dict(os.environ, PATH=str(tmp_path / "empty"))
    state = git.probe(ProbeContext(root=repo, environ=env))
    assert state.status == "no-git" and state.commit is None and "not found" in state.note


def test_no_folder_given_means_no_git_probe():
    assert git.probe(ProbeContext(root=None)) is None


def test_probing_takes_no_index_lock(repo):
    """GIT_OPTIONAL_LOCKS=0: a status run must not leave or need index.lock."""
    (repo / "train.py").write_text("print('changed')\n")
    lock = repo / ".git" / "index.lock"
    lock.write_text("")  # as if the user's git were running right now
    try:
        assert _probe(repo).dirty
    finally:
        lock.unlink()


def test_porcelain_parser():
    assert git.parse_porcelain(" M a.py\n?? b.py\n?? c/\n\n") == (3, 2)
    assert git.parse_porcelain("") == (0, 0)
