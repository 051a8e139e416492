"""Descends-with-only-allowed-changes, on real repositories made in tmp_path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ftmanifest.probe import git_ancestry
from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe.git import git_context
from ftmanifest.probe.git_ancestry import descends_with_only
from tests.conftest import GIT_ENV

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is not installed")
ENV = {**os.environ, **GIT_ENV}


def _git(repo: Path, *args: str) -> str:
    argv = [GIT or "git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"]
    done = subprocess.run(
        [*argv, *args], cwd=repo, env=ENV, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def _commit(repo: Path, message: str, *, stage: bool = True, **files: str) -> str:
    """Write ``files`` (name -> text; '/' in names via the key '__') and commit.

    ``stage=False`` commits the index as it is (what update-index put there).
    """
    for name, text in files.items():
        path = repo / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    if stage:
        _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    root.mkdir()
    _git(root, "init", "-q")
    _commit(root, "first", **{"train.py": "print('train')\n", "m.yaml": "name: a\n"})
    return root


def _check(repo: Path, pinned: str, *allowed: str, head: str | None = None, **kw):
    head = head or _git(repo, "rev-parse", "HEAD")
    paths = [repo / name for name in allowed]
    return descends_with_only(repo, pinned, head, paths, ctx=ProbeContext(environ=ENV), **kw)


MANIFEST = ("m.yaml", "m.yaml.sig.json", "m.yaml.runs.jsonl")


def test_same_commit_is_ok(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    assert _check(repo, pinned) == git_ancestry.AncestryResult(True, "same commit")


def test_committing_only_the_manifest_is_ok(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "lock", **{"m.yaml": "name: a\ncommit: x\n", "m.yaml.sig.json": "{}"})
    _commit(repo, "ran", **{"m.yaml.runs.jsonl": "{}\n"})
    result = _check(repo, pinned, *MANIFEST)
    assert result.ok and result.reason == "only allowed files changed" and not result.offending


def test_manifest_and_code_together_names_the_code(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "lock", **{"m.yaml": "name: b\n", "train.py": "print('other')\n"})
    result = _check(repo, pinned, *MANIFEST)
    assert not result.ok and result.reason == "other files changed"
    assert result.offending == ("train.py",) and result.offending_count == 1


def test_a_change_reverted_later_is_ok(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "try", **{"train.py": "print('experiment')\n", "helper.py": "x = 1\n"})
    (repo / "helper.py").unlink()
    _commit(repo, "undo", **{"train.py": "print('train')\n", "m.yaml": "name: c\n"})
    assert _check(repo, pinned, *MANIFEST).ok


def test_a_branch_that_does_not_descend_is_refused(repo):
    _commit(repo, "base")
    _git(repo, "checkout", "-q", "-b", "side", "HEAD~1")
    side = _commit(repo, "side", **{"m.yaml": "name: side\n"})
    _git(repo, "checkout", "-q", "main")
    pinned = _git(repo, "rev-parse", "HEAD")
    result = _check(repo, pinned, *MANIFEST, head=side)
    assert not result.ok and result.reason == "not a descendant" and result.note is None


def test_head_behind_the_pinned_commit_is_refused(repo):
    old = _git(repo, "rev-parse", "HEAD")
    pinned = _commit(repo, "lock", **{"m.yaml": "name: later\n"})
    assert _check(repo, pinned, *MANIFEST, head=old).reason == "not a descendant"


def test_unknown_pinned_commit(repo):
    result = _check(repo, "0123456789abcdef0123456789abcdef01234567", *MANIFEST)
    assert not result.ok and result.reason == "pinned commit not in this repository"


def test_unknown_head_commit(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    result = _check(repo, pinned, head="f" * 40)
    assert not result.ok and result.reason == "head commit not in this repository"


def test_shallow_clone_says_so(repo, tmp_path):
    pinned = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "lock", **{"m.yaml": "name: d\n"})
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--depth", "1", repo.as_uri(), str(clone))
    result = _check(clone, pinned, *MANIFEST)
    assert result.reason == "pinned commit not in this repository"
    assert "--unshallow" in (result.note or "")


@pytest.mark.parametrize("rev", ["HEAD", "main", "--output=x", "abc1234", "A" * 40, ""])
def test_only_full_commit_ids_reach_git(repo, rev):
    result = _check(repo, rev)
    assert not result.ok and result.reason == "not a commit id"


def test_a_tag_object_is_not_a_commit(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    _git(repo, "tag", "-a", "-m", "t", "v1")
    tag = _git(repo, "rev-parse", "v1")
    assert tag != pinned
    assert _check(repo, tag).reason == "not a commit id"


def test_renaming_an_allowed_file_offends_with_the_new_name(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    _git(repo, "mv", "m.yaml", "sneaky.py")
    _commit(repo, "rename")
    result = _check(repo, pinned, *MANIFEST)
    assert not result.ok and result.offending == ("sneaky.py",)


def test_mode_change_counts(repo):
    pinned = _commit(repo, "script", **{"run.sh": "echo hi\n", "data.csv": "a\n"})
    _git(repo, "update-index", "--chmod=+x", "run.sh")
    _commit(repo, "chmod", stage=False)
    result = _check(repo, pinned, *MANIFEST)
    assert not result.ok and result.offending == ("run.sh",)
    _git(repo, "update-index", "--chmod=-x", "run.sh")
    _git(repo, "update-index", "--chmod=+x", "data.csv")
    _commit(repo, "chmod back, and of an allowed file", stage=False)
    assert _check(repo, pinned, *MANIFEST, "data.csv").ok


WEIRD = ["with space.jsonl", "new\nline.jsonl", "caf\u00e9 \u6570\u636e.jsonl", ":colon", "tab\t.x"]


def test_weird_names_are_matched_exactly(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    for name in WEIRD:
        (repo / name).write_text("x\n", "utf-8")
    _commit(repo, "weird data")
    assert _check(repo, pinned, *WEIRD).ok
    result = _check(repo, pinned, *WEIRD[1:])
    assert result.offending == ("with space.jsonl",)
    result = _check(repo, pinned, "with space.jsonl")
    assert set(result.offending) == set(WEIRD[1:]) and result.offending_count == 4


@pytest.mark.skipif(sys.platform != "linux", reason="needs a file system that keeps any bytes")
def test_a_name_that_is_not_utf8_always_offends(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    name = os.fsdecode(b"caf\xe9.jsonl")
    (repo / name).write_text("x\n", "utf-8")
    _commit(repo, "latin-1 name")
    result = _check(repo, pinned, name)
    assert not result.ok and result.offending_count == 1


def test_merge_bringing_in_another_file_is_refused(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-b", "feature")
    _commit(repo, "feature", **{"extra.py": "import os\n"})
    _git(repo, "checkout", "-q", "main")
    _commit(repo, "lock", **{"m.yaml": "name: e\n"})
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge", "feature")
    result = _check(repo, pinned, *MANIFEST)
    assert not result.ok and result.offending == ("extra.py",)


def test_merge_of_manifest_only_branches_is_ok(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-b", "feature")
    _commit(repo, "runs", **{"m.yaml.runs.jsonl": "{}\n"})
    _git(repo, "checkout", "-q", "main")
    _commit(repo, "lock", **{"m.yaml": "name: f\n"})
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge", "feature")
    assert _check(repo, pinned, *MANIFEST).ok


def test_an_allowed_folder_allows_what_is_below_it_only(repo):
    pinned = _commit(repo, "model", **{"model__w.bin": "1", "model2__w.bin": "1"})
    _commit(repo, "retrain", **{"model__w.bin": "2", "model__sub__new.json": "{}"})
    assert _check(repo, pinned, "model").ok
    _commit(repo, "next door", **{"model2__w.bin": "2"})
    assert _check(repo, pinned, "model").offending == ("model2/w.bin",)


def test_the_repository_root_allows_nothing(repo, tmp_path):
    pinned = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "code", **{"train.py": "print('changed')\n"})
    paths = [repo, tmp_path, Path("/"), repo / "." / "sub" / ".."]
    result = descends_with_only(
        repo, pinned, _git(repo, "rev-parse", "HEAD"), paths, ctx=ProbeContext(environ=ENV)
    )
    assert result.offending == ("train.py",)


def test_a_data_path_that_links_to_code_does_not_allow_the_code(repo):
    """Allowed is about the repository path; a link's target is judged under its own name."""
    (repo / "data.jsonl").symlink_to("train.py")
    pinned = _commit(repo, "data is a link")
    _commit(repo, "code", **{"train.py": "print('changed')\n"})
    result = _check(repo, pinned, *MANIFEST, "data.jsonl")
    assert not result.ok and result.offending == ("train.py",)


def test_an_allowed_link_may_be_repointed(repo):
    (repo / "data.jsonl").symlink_to("a.jsonl")
    pinned = _commit(repo, "data is a link", **{"a.jsonl": "1\n", "b.jsonl": "2\n"})
    (repo / "data.jsonl").unlink()
    (repo / "data.jsonl").symlink_to("b.jsonl")
    _commit(repo, "repoint")
    assert _check(repo, pinned, "data.jsonl").ok


def _gitlink(repo: Path, path: str, commit: str) -> None:
    _git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},{path}")


def test_a_changed_submodule_always_offends(repo):
    first = _git(repo, "rev-parse", "HEAD")
    second = _commit(repo, "second")
    (repo / ".gitmodules").write_text('[submodule "vendor"]\n\tpath = model/vendor\n')
    _git(repo, "add", ".gitmodules")
    _gitlink(repo, "model/vendor", first)
    pinned = _commit(repo, "submodule", stage=False)
    (repo / ".gitmodules").write_text(
        '[submodule "vendor"]\n\tpath = model/vendor\n\tignore = all\n'
    )
    _git(repo, "add", ".gitmodules")
    _gitlink(repo, "model/vendor", second)
    _commit(repo, "bump, and try to hide it", stage=False)
    result = _check(repo, pinned, "model", ".gitmodules")
    assert not result.ok and result.offending == ("model/vendor",)


def test_repo_root_given_through_a_link_outside_the_repository(repo, tmp_path):
    pinned = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "lock", **{"m.yaml": "name: g\n", "pkg__x.py": ""})
    link = tmp_path / "link"
    link.symlink_to(repo)
    head = _git(repo, "rev-parse", "HEAD")
    ctx = ProbeContext(environ=ENV)
    assert descends_with_only(link / "pkg", pinned, head, [link / "m.yaml"], ctx=ctx).offending == (
        "pkg/x.py",
    )
    assert descends_with_only(
        link / "pkg", pinned, head, [link / "m.yaml", link / "pkg"], ctx=ctx
    ).ok


def test_relative_allowed_paths_are_under_repo_root(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    head = _commit(repo, "lock", **{"m.yaml": "name: h\n"})
    ctx = ProbeContext(environ=ENV)
    assert descends_with_only(repo, pinned, head, [Path("m.yaml")], ctx=ctx).ok


def test_not_a_repository(tmp_path):
    env = {**ENV, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}
    commit = "a" * 40
    result = descends_with_only(tmp_path, commit, "b" * 40, [], ctx=ProbeContext(environ=env))
    assert not result.ok and result.reason == "not a git repository"
    result = descends_with_only(tmp_path / "nope", commit, commit, [], ctx=ProbeContext())
    assert result.reason == "not a git repository"


def test_git_missing(repo, tmp_path):
    env = {**ENV, "PATH": str(tmp_path / "empty")}
    pinned = _git(repo, "rev-parse", "HEAD")
    result = descends_with_only(repo, pinned, pinned, [], ctx=ProbeContext(environ=env))
    assert not result.ok and result.reason == "git not found"


def test_git_hanging_is_an_error_not_an_exception(repo, tmp_path, kit):
    kit.tool(tmp_path / "bin", "git", f"exec {kit.sleep} 5\n")
    ctx = ProbeContext(environ=kit.env(tmp_path / "bin"), timeout=0.3)
    result = descends_with_only(repo, "a" * 40, "b" * 40, [], ctx=ctx)
    assert not result.ok and result.reason == "git error" and "timed out" in (result.note or "")


def test_git_failing_later_is_an_error(repo, tmp_path, kit):
    """rev-parse answers, the ancestry question fails: refused, never ok."""
    real = GIT or "git"
    script = f'case "$1" in rev-parse) exec {real} "$@";; *) echo boom >&2; exit 7;; esac\n'
    kit.tool(tmp_path / "bin", "git", script)
    pinned = _git(repo, "rev-parse", "HEAD")
    head = _commit(repo, "lock", **{"m.yaml": "name: i\n"})
    env = {**kit.env(tmp_path / "bin"), **GIT_ENV}
    result = descends_with_only(
        repo, pinned, head, [repo / "m.yaml"], ctx=ProbeContext(environ=env)
    )
    assert not result.ok and result.reason == "git error" and "boom" in (result.note or "")


def test_offending_paths_are_capped(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "many", **{f"f{i:02}.py": "" for i in range(30)})
    result = _check(repo, pinned, *MANIFEST)
    assert len(result.offending) == git_ancestry.MAX_OFFENDING and result.offending_count == 30


def test_raw_parser_keeps_both_names_of_a_rename():
    zero = "0" * 40
    text = (
        f":100644 100644 {zero} {zero} R100\0old name\0new\nname\0"
        f":000000 160000 {zero} {zero} A\0sub\0"
        f":100644 100755 {zero} {zero} M\0:odd\0"
    )
    assert git_ancestry.parse_raw_z(text) == [
        ("old name", False),
        ("new\nname", False),
        ("sub", True),
        (":odd", False),
    ]


def test_replace_refs_cannot_fake_the_history(repo):
    """``git replace --graft`` could make a side branch look descended; stored objects rule."""
    base = _git(repo, "rev-parse", "HEAD")
    pinned = _commit(repo, "ran", **{"m.yaml.runs.jsonl": "{}\n"})
    _git(repo, "checkout", "-q", "-b", "side", base)
    side = _commit(repo, "elsewhere", **{"m.yaml": "name: side\n"})
    _git(repo, "replace", "--graft", side, pinned)
    assert _git(repo, "merge-base", "--is-ancestor", pinned, side) == ""  # git is fooled
    assert _check(repo, pinned, *MANIFEST, head=side).reason == "not a descendant"


def test_a_held_index_lock_does_not_matter(repo):
    pinned = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "lock", **{"m.yaml": "name: j\n"})
    lock = repo / ".git" / "index.lock"
    lock.write_text("")  # as if the user's git were running right now
    try:
        assert _check(repo, pinned, *MANIFEST).ok
    finally:
        lock.unlink()


def test_git_context_sets_the_safe_environment():
    ctx = git_context(ProbeContext(environ={"LC_ALL": "de_DE.UTF-8", "PATH": "/bin"}))
    assert ctx.environ["LC_ALL"] == "C" and ctx.environ["GIT_OPTIONAL_LOCKS"] == "0"
    assert ctx.environ["GIT_NO_REPLACE_OBJECTS"] == "1" and ctx.environ["PATH"] == "/bin"
