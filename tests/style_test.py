"""The package stays ruff-clean and mypy-clean (STYLE.md, habit 12)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_check() -> None:
    result = _run("ruff", "check", "ftmanifest", "tests", "benchmarks", "manifests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_on_the_package() -> None:
    result = _run("mypy", "ftmanifest")
    assert result.returncode == 0, result.stdout + result.stderr
