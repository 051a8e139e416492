"""The preflight's fresh processes collect cyclic garbage as the CLI does.

Each child imports torch, transformers and peft, about a million objects; under the
default thresholds the collector ran some 900 times and took a fifth of the child's
CPU time.  ``python -m`` runs each child's ``__main__`` block, which tunes the
collector before ``main`` imports anything: the thresholds are read at exit, with
torch made unimportable so that ``main`` stops at its first import.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import atexit, gc, runpy, sys
atexit.register(lambda: print("gc", gc.get_threshold(), gc.get_freeze_count() > 0))
sys.modules["torch"] = None  # main's first import fails: nothing heavy is loaded
sys.argv = [sys.argv[0]]
runpy.run_module({module!r}, run_name="__main__")
"""


@pytest.mark.parametrize("module", ["repeat_child", "resume_child"])
def test_a_child_tunes_the_collector_before_it_imports_torch(module: str) -> None:
    name = f"ftmanifest.preflight.{module}"
    done = subprocess.run([sys.executable, "-c", PROBE.format(module=name)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "ModuleNotFoundError" in done.stderr or "ImportError" in done.stderr, done.stderr
    assert "gc (50000, 20, 100) True" in done.stdout, done.stdout + done.stderr


def test_control_the_same_probe_without_the_main_block_keeps_the_defaults() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE.format(module="ftmanifest.preflight.steps")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "gc (700, 10, 10) False" in done.stdout, done.stdout
