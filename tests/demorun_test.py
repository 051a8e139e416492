"""The demo's stamp: a log stands in for a new demo run only for the same tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import git
from tests.support import demorun

if shutil.which("git") is None:
    pytest.skip("the stamp digests a git checkout's files", allow_module_level=True)


@pytest.fixture
def stamped(tmp_path: Path) -> Path:
    """A checkout whose demo-out holds a log and a stamp of the tree as it is."""
    root = tmp_path / "project"
    (root / "ftmanifest").mkdir(parents=True)
    (root / "ftmanifest" / "__init__.py").write_text("")
    (root / "run.sh").write_text("echo hi\n")
    (root / ".gitignore").write_text("demo-out/\n.venv-demo/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "tree")
    before = demorun.tree_digest(root)
    (root / "demo-out").mkdir()
    (root / "demo-out" / "demo.log").write_text("$ ftmanifest --version\nftmanifest 1\n")
    (root / ".venv-demo").mkdir()
    (root / ".venv-demo" / "big").write_text("a venv")
    # as if the venv's ftmanifest were root's (the editable install `make demo` makes)
    assert demorun.write_stamp(root, before, ftmanifest_at=root / "ftmanifest")
    return root


def test_the_log_of_this_tree_is_reused(stamped: Path) -> None:
    assert demorun.reusable_log(stamped) == "$ ftmanifest --version\nftmanifest 1\n"


def test_ignored_output_does_not_change_the_tree(stamped: Path) -> None:
    (stamped / ".venv-demo" / "more").write_text("x")
    (stamped / "demo-out" / "later.txt").write_text("x")
    assert demorun.reusable_log(stamped) is not None


@pytest.mark.parametrize(
    "change",
    [
        lambda r: (r / "run.sh").write_text("echo bye\n"),  # an edited tracked file
        lambda r: (r / "run.sh").chmod(0o755),  # made executable
        lambda r: (r / "run.sh").unlink(),  # deleted, not yet in git
        lambda r: (r / "new.py").write_text(""),  # a new file git does not ignore
        lambda r: (r / "demo-out" / "demo.log").write_text("edited"),  # the log itself
        lambda r: (r / "demo-out" / "stamp.json").unlink(),  # no stamp
        lambda r: (r / "demo-out" / "stamp.json").write_text("{"),  # unreadable stamp
    ],
    ids=["edited", "mode", "deleted", "untracked", "log", "no-stamp", "bad-stamp"],
)
def test_a_changed_tree_or_log_runs_the_demo_again(stamped: Path, change: object) -> None:
    change(stamped)  # type: ignore[operator]
    assert demorun.reusable_log(stamped) is None


@pytest.mark.parametrize("field", ["python", "root", "package"])
def test_another_python_place_or_package_version_runs_the_demo_again(
    stamped: Path, field: str
) -> None:
    path = stamped / "demo-out" / "stamp.json"
    stamp = json.loads(path.read_text())
    if field == "package":
        stamp["packages"]["pytest"] = "0.0.1"
    else:
        stamp[field] += "x"
    path.write_text(json.dumps(stamp))
    assert demorun.reusable_log(stamped) is None


def test_a_tree_changed_while_the_demo_ran_is_not_stamped(stamped: Path) -> None:
    before = demorun.tree_digest(stamped)
    (stamped / "run.sh").write_text("echo changed meanwhile\n")
    assert not demorun.write_stamp(stamped, before, ftmanifest_at=stamped / "ftmanifest")


def test_a_demo_run_with_another_trees_ftmanifest_is_not_stamped(stamped: Path) -> None:
    """The venv's ftmanifest is the code that ran: it must be this tree's."""
    (stamped / "demo-out" / "stamp.json").unlink()
    before = demorun.tree_digest(stamped)
    assert not demorun.write_stamp(stamped, before)  # this venv's: the repository's own
    assert not (stamped / "demo-out" / "stamp.json").exists()
    assert demorun.installed_ftmanifest() == demorun.ROOT / "ftmanifest"
