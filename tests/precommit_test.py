"""The real pre-commit runs our hook from a real git repository at a commit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLF, GIT_ENV, ROOT


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _snapshot_of_this_project(dest: Path) -> str:
    """A git repo holding this working tree (tracked and untracked, not ignored)."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "snapshot")
    return _git(dest, "rev-parse", "HEAD")


def _skip_unless_index_reachable(dest: Path) -> None:
    """Skip when pip cannot fetch this project's build backend.

    The real pre-commit installs the hook (``language: python``) into a fresh
    virtualenv with pip, from whatever index pip is configured for; without
    one that answers, the test would fail for a reason that is not ours.
    """
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(dest)]
    cmd += ["--timeout", "5", "--retries", "0", "--quiet", *requires]
    try:
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        why = "timed out"
    else:
        if got.returncode == 0:
            return
        why = ((got.stderr or got.stdout).strip().splitlines() or ["no output"])[-1]
    pytest.skip(
        f"package index unreachable: pip cannot download {', '.join(requires)} ({why}); "
        "the real pre-commit installs the hook with pip"
    )


def test_pre_commit_rejects_unpinned_and_passes_pinned(tmp_path: Path) -> None:
    _skip_unless_index_reachable(tmp_path / "build-backend")
    hook_repo = tmp_path / "ftmanifest-repo"
    hook_repo.mkdir()
    rev = _snapshot_of_this_project(hook_repo)

    user = tmp_path / "user-repo"
    (user / "manifests").mkdir(parents=True)
    _git(user, "init", "-q")
    (user / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {rev}\n    hooks:\n      - id: ftmanifest-lint\n"
    )
    (user / "manifests" / "exp.yaml").write_text(CLF.read_text())
    (user / "notes.yaml").write_text("not: a manifest\n")  # outside the files pattern
    _git(user, "add", "-A")

    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(tmp_path / "pc-home")}
    env.pop("FTMANIFEST_DEBUG", None)

    def pre_commit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--all-files"],
            cwd=user,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    passed = pre_commit()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "ftmanifest lint" in passed.stdout and "Passed" in passed.stdout

    text = CLF.read_text()
    (user / "manifests" / "exp.yaml").write_text(
        text.replace("  revision: ", "  revision: main  # ", 1)
    )
    _git(user, "add", "-A")
    failed = pre_commit()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    line_no = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith("  revision: "))
    assert f"manifests/exp.yaml:{line_no}:3: FTM001" in failed.stdout


def test_hook_entry_point_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    from ftmanifest.integrations.precommit import lint_main

    assert lint_main([]) == 0  # pre-commit matched no manifest
    assert lint_main([str(CLF)]) == 0
    assert lint_main(["--format", "json", str(CLF)]) == 0
    assert '"findings": []' in capsys.readouterr().out
    assert lint_main(["--format=xml", str(CLF)]) == 2
    assert lint_main(["--fix", str(CLF)]) == 2
    assert "unknown option --fix" in capsys.readouterr().err
