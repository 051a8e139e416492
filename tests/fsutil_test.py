"""The bound of a manifest's paths: the git repository holding it, else its folder.

``enclosing_repository`` reads the file system only; each case is checked
against what git itself says (``git rev-parse --show-toplevel``) on a real
repository, a linked worktree and a nested repository.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ftmanifest.fsutil import PathOutsideError, enclosing_repository, path_bound, resolve_inside
from ftmanifest.probe.git import repository_root
from tests.conftest import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "manifests").mkdir(parents=True)
    (root / "data.jsonl").write_text("{}\n")
    (root / "README").write_text("x\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    return root


def test_a_repository_is_found_from_a_subfolder_as_git_finds_it(repo: Path) -> None:
    sub = repo / "manifests"
    assert enclosing_repository(sub) == repo.resolve() == repository_root(sub)
    assert resolve_inside(sub, "../data.jsonl", ("data", 0, "path"), False) == sub / "../data.jsonl"


def test_a_linked_worktree_is_its_own_repository(repo: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", str(tree))
    assert (tree / ".git").is_file()  # "gitdir: ..."
    assert enclosing_repository(tree) == tree.resolve() == repository_root(tree)


def test_a_nested_repository_bounds_its_own_manifests(repo: Path) -> None:
    inner = repo / "vendor" / "inner"
    inner.mkdir(parents=True)
    git(inner, "init", "-q")
    assert enclosing_repository(inner) == inner.resolve() == repository_root(inner)
    with pytest.raises(PathOutsideError, match="leaves the manifest's repository"):
        resolve_inside(inner, "../../data.jsonl", ("data", 0, "path"), False)


def test_a_dot_git_that_is_no_repository_is_not_taken(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)  # no HEAD: git says "not a git repository"
    (tmp_path / "other" / ".git").parent.mkdir()
    (tmp_path / "other" / ".git").write_text("not a gitdir line\n")
    assert enclosing_repository(work) is None
    assert enclosing_repository(tmp_path / "other") is None
    assert path_bound(work) == work.resolve()


def test_a_dot_git_another_user_owns_is_not_taken(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As git's safe.directory: a .git planted in a shared folder widens nothing."""
    owner = (repo / ".git").lstat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1000)
    assert enclosing_repository(repo / "manifests") is None
    with pytest.raises(PathOutsideError, match="leaves the manifest's folder"):
        resolve_inside(repo / "manifests", "../data.jsonl", ("data", 0, "path"), False)
    monkeypatch.setattr(os, "geteuid", lambda: owner)  # control: the owner
    assert enclosing_repository(repo / "manifests") == repo.resolve()


def test_a_symlinked_manifest_folder_is_bound_by_the_repository_it_lies_in(
    repo: Path, tmp_path: Path
) -> None:
    link = tmp_path / "elsewhere"
    link.symlink_to(repo / "manifests")
    assert enclosing_repository(link) == repo.resolve()
    (tmp_path / "outside.jsonl").write_text("{}\n")
    # ".." is taken from where the link leads, as the file system does
    assert resolve_inside(link, "../data.jsonl", ("data", 0, "path"), False).is_file()
    with pytest.raises(PathOutsideError, match="leaves the manifest's repository"):
        resolve_inside(link, "../../outside.jsonl", ("data", 0, "path"), False)


@pytest.mark.parametrize("where", ["repo", "no-repo"])
def test_an_absolute_path_is_refused_even_inside_the_repository(
    repo: Path, tmp_path: Path, where: str
) -> None:
    base = repo / "manifests" if where == "repo" else tmp_path
    with pytest.raises(PathOutsideError) as caught:
        resolve_inside(base, str(repo / "data.jsonl"), ("data", 0, "path"), False)
    assert "relative to the manifest's folder" in (caught.value.expected or "")
