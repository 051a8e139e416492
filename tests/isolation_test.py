"""The suite's own isolation: what one test module changes in the worker process
does not reach the next module's tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

TRAINS_AS_A_MODULE = """
import os

import pytest
import torch


@pytest.fixture(scope="module")
def trained():
    # what transformers' enable_full_determinism does, from a module-scoped fixture
    torch.use_deterministic_algorithms(True)
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"


def test_uses_the_trained_state(trained):
    assert torch.are_deterministic_algorithms_enabled()
"""

NEXT_MODULE = """
import os

import torch


def test_finds_the_default_state():
    assert not torch.are_deterministic_algorithms_enabled()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
"""


def _run(folder: Path, *plugins: str) -> subprocess.CompletedProcess[str]:
    (folder / "a_test.py").write_text(TRAINS_AS_A_MODULE, "utf-8")
    (folder / "b_test.py").write_text(NEXT_MODULE, "utf-8")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    for plugin in plugins:
        argv += ["-p", plugin]
    argv += ["--rootdir", str(folder), str(folder / "a_test.py"), str(folder / "b_test.py")]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(folder)}
    return subprocess.run(argv, capture_output=True, text=True, cwd=folder, env=env, timeout=300)


def test_a_module_fixture_that_sets_determinism_does_not_leak(tmp_path: Path) -> None:
    done = _run(tmp_path, "tests.conftest")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_control_without_the_suite_fixtures_the_state_leaks(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout
