"""The README's five-minute path prints what the commands print today.

Its ``sh`` set-up block runs in a scratch folder, then every ``console`` block of
the section, command by command, in the folder the set-up ends in: each
``$ COMMAND`` runs in bash with its output (stdout and stderr together) compared
with the lines under it, as ``tests.support.console`` compares them.  A README
that shows an output the tool no longer prints fails here, so the docs stay true.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.console import commands, console_blocks, fold, matches

pytest.importorskip("transformers")  # the path runs a real Trainer

SECTION = "## Five minutes"


def _blocks(readme: str) -> tuple[str, list[list[str]]]:
    """(the set-up ``sh`` block, every ``console`` block as lines) of the section."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end >= 0 else None]
    setup = re.search(r"```sh\n(.*?)```", section, re.S)
    assert setup is not None, "the five-minute section has no sh set-up block"
    consoles = console_blocks(section)
    return setup.group(1), consoles


def test_every_console_block_of_the_five_minute_path_matches(tmp_path: Path) -> None:
    setup, consoles = _blocks((ROOT / "README.md").read_text("utf-8"))
    assert consoles, "the five-minute section shows no console block"
    # a clean environment, as a reader's shell would be: other tests set variables
    # (CUBLAS_WORKSPACE_CONFIG...) that lock would pin and the Trainer then compare
    keep = ("PYTHONPATH", "LANG", "LC_ALL", "TMPDIR", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update({
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
        "FTMANIFEST_CACHE_DIR": str(tmp_path / "cache"),
        "HOME": str(tmp_path / "home"),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "COLUMNS": "100",
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",  # output in the order a terminal shows it
    })  # fmt: skip
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # the set-up's first line moves into a new temporary folder: use this test's
    script = setup.replace('REPO=$PWD; cd "$(mktemp -d)"', f"REPO={ROOT}; cd {scratch}")
    assert script != setup, "the set-up no longer starts in a scratch folder as expected"
    done = subprocess.run(
        ["bash", "-euc", script + '\necho "cwd=$PWD"'],
        cwd=scratch, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    cwd = done.stdout.strip().splitlines()[-1].removeprefix("cwd=")
    env["REPO"] = str(ROOT)
    stale: list[str] = []
    for block in consoles:
        for command, expected in commands(block):
            ran = subprocess.run(
                ["bash", "-c", command + " 2>&1"],
                cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            actual = fold(ran.stdout, str(scratch))
            want = [fold(line, str(scratch)) for line in expected]
            if not matches(want, actual):
                stale.append(
                    f"$ {command}\n--- README shows:\n" + "\n".join(expected)
                    + f"\n--- it prints now:\n{ran.stdout}"
                )  # fmt: skip
    assert not stale, "README console blocks that no longer match:\n\n" + "\n\n".join(stale)
