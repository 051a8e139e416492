"""One observation per verify: git is asked for the repository root once.

A signed, trusted project verified through the CLI: the trust file lookup,
the code probe and the ledger's location each need the work tree root, and
used to ask git for it one after another (five ``git rev-parse
--show-toplevel`` per verify).  Between two verifies nothing is remembered,
so a folder that became a repository in between is seen as one.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.cli import main
from ftmanifest.probe.git import one_observation, repository_root
from tests.conftest import git
from tests.verify.reproduce_test import _trusted


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every git command this process starts, counted by its first three words."""
    seen: Counter[str] = Counter()
    real = subprocess.Popen.__init__

    def counting(self: Any, args: Any, *a: Any, **k: Any) -> None:
        if isinstance(args, (list, tuple)) and args and Path(str(args[0])).name == "git":
            seen[" ".join(str(x) for x in args[1:3])] += 1
        real(self, args, *a, **k)

    monkeypatch.setattr(subprocess.Popen, "__init__", counting)
    yield seen


def test_a_signed_verify_asks_git_for_the_root_once(
    project: Path, asked: Counter[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _trusted(project)
    asked.clear()
    assert main(["verify", str(project), "--no-cache"]) == 0, capsys.readouterr()
    assert asked["rev-parse --show-toplevel"] == 1, asked
    asked.clear()
    assert main(["verify", str(project)]) == 0  # a second verify asks again, once
    assert asked["rev-parse --show-toplevel"] == 1, asked


def test_outside_an_observation_nothing_is_remembered(tmp_path: Path) -> None:
    folder = tmp_path / "later"
    folder.mkdir()
    with one_observation():
        assert repository_root(folder) is None or repository_root(folder) != folder
        first = repository_root(folder)
    git(folder, "init", "-q")
    assert repository_root(folder) == folder.resolve() != first
    with one_observation():  # a new observation asks again
        assert repository_root(folder) == folder.resolve()


def test_a_signed_verify_canonicalises_the_manifest_once(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The digest, the signed payload and the report share one RFC 8785 form."""
    import sys

    from ftmanifest.manifest import canonical

    _trusted(project)
    real, manifests = canonical.canonical_json, []

    def counting(value: Any) -> bytes:
        if isinstance(value, dict) and {"ftmanifest", "experiment"} <= value.keys():
            manifests.append(value)
        return real(value)

    for module in list(sys.modules.values()):  # every module that imported it by name
        if getattr(module, "canonical_json", None) is real:
            monkeypatch.setattr(module, "canonical_json", counting)
    assert main(["verify", str(project)]) == 0, capsys.readouterr()
    assert len(manifests) == 1
