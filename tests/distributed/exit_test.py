"""A CLI rank that made a torch.distributed group ends without the interpreter's teardown.

gloo's C++ threads can abort a rank while the interpreter tears down, after the
command chose its exit code, so ``cli.entry`` ends such a process with ``os._exit``
once the exit handlers ran and the streams are flushed.  Shown in a real interpreter:
``os._exit`` is wrapped to say when the process ends that way.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = """
import atexit, os, sys
from ftmanifest.distributed import comm
comm.made_a_group = {made}
real_exit = os._exit

def noted_exit(code):
    os.write(1, b"past the teardown\\n")
    real_exit(code)

os._exit = noted_exit
atexit.register(lambda: print("exit handler ran", flush=True))
sys.argv = ["ftmanifest", "lint", "absent.yaml"]
print("result printed")  # buffered: the flush before the exit must write it
from ftmanifest.cli import entry
entry()
"""


def _run(made: bool, tmp_path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(made=made)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("made", [True, False], ids=["made-a-group", "control"])
def test_a_rank_that_made_a_group_skips_only_the_teardown(made: bool, tmp_path) -> None:
    done = _run(made, tmp_path)
    assert done.returncode == 2, done.stderr  # lint's own code for a missing manifest
    assert "absent.yaml" in done.stdout
    assert "result printed" in done.stdout and "exit handler ran" in done.stdout
    assert ("past the teardown" in done.stdout) is made, done.stdout
    if made:  # the handlers ran and the streams were flushed before the process ended
        assert done.stdout.endswith("exit handler ran\npast the teardown\n"), done.stdout
