"""The tutorial shows what ``make demo`` prints today (issue 30).

The tutorial walks through manifests/demo.sh step by step.  This test runs the
demo in a copy of the project, then finds every command of every ``console``
block of docs/tutorial.md in the demo's full log (demo-out/demo.log), in order,
and compares the output shown under it with what the demo printed, as
``tests.support.console`` compares them.  The demo logs a command as bash's
``"$*"`` writes it (no quotes), so the tutorial's command is split as a shell
would split it before comparing; ``'...'`` stands for an argument not shown, a
leading ``(cd DIR && ...)`` for the folder it runs in, and a trailing
``# comment`` is the tutorial's own.  A command shown with no output must still
be one the demo runs as written.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.console import commands, console_blocks, fold, matches

pytest.importorskip("transformers")  # the demo trains a real tiny model
if shutil.which("git") is None:
    pytest.skip("the demo needs git (its tiny example is a repository)", allow_module_level=True)

TUTORIAL = ROOT / "docs" / "tutorial.md"
NOT_IN_THE_LOG = {"make demo"}  # the command that runs the demo itself
_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{12}\b")
_SKIP = {".venv", ".git", "demo-out", ".pytest_cache", ".hypothesis", "__pycache__", ".mypy_cache"}


def _pattern(command: str) -> re.Pattern[str]:
    """The demo log's ``$ COMMAND`` line for the tutorial's COMMAND."""
    command = re.sub(r"\s+#[^'\"]*$", "", command)  # the tutorial's comment
    inner = re.fullmatch(r"\(cd \S+ && (.*)\)", command)
    if inner:
        command = inner.group(1)
    words = [r"(?s:.*?)" if w == "..." else re.escape(w) for w in shlex.split(command)]
    return re.compile(r"^\$ " + " ".join(words) + r"\n", re.M)


def _outputs(log: str) -> list[tuple[int, int, int]]:
    """(start of the ``$`` line, start of its output, end of its output) of each command."""
    starts = [m.start() for m in re.finditer(r"^(?:\$ |== )", log, re.M)] + [len(log)]
    return [(a, a, b) for a, b in zip(starts, starts[1:], strict=False) if log[a] == "$"]


def _run_demo(tmp_path: Path) -> tuple[str, Path]:
    copy = tmp_path / "project"
    shutil.copytree(ROOT, copy, ignore=lambda _d, names: [n for n in names if n in _SKIP])
    env = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TMPDIR")}
    env.update({
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "FTMANIFEST_CACHE_DIR": str(tmp_path / "cache"),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "HF_HUB_OFFLINE": "1",
        # no PYTHONPATH: run and the guard refuse a start-up variable the manifest does not pin;
        # the installed (editable) ftmanifest is this same code
    })  # fmt: skip
    done = subprocess.run(
        ["bash", "manifests/demo.sh"], cwd=copy, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return (copy / "demo-out" / "demo.log").read_text("utf-8"), copy


def stale(tutorial: str, log: str, root: str) -> list[str]:
    """Every command of the tutorial's console blocks that the demo's LOG does not show
    as the tutorial does (the demo ran in ROOT), with both texts."""
    log = log.replace(root + "/", "")  # paths the demo printed in full: as the tutorial shows
    log = _ID.sub("<backup-id>", log)  # a backup's id is a command's argument too
    entries = _outputs(log)
    out: list[str] = []
    at = 0  # the tutorial follows the demo's order
    for block in console_blocks(tutorial):
        for command, expected in commands(block):
            if command in NOT_IN_THE_LOG:
                continue
            pattern = _pattern(_ID.sub("<backup-id>", command))
            found = next((e for e in entries if e[0] >= at and pattern.match(log, e[0])), None)
            if found is None:
                line = log[:at].count("\n")
                out.append(f"$ {command}\n--- the demo does not run this command (after line "
                           f"{line} of its log)")  # fmt: skip
                continue
            head = pattern.match(log, found[0])
            assert head is not None
            at = found[2]
            printed = log[head.end() : found[2]].rstrip("\n")
            if expected and not matches([fold(e, root) for e in expected], fold(printed, root)):
                out.append(
                    f"$ {command}\n--- the tutorial shows:\n" + "\n".join(expected)
                    + f"\n--- the demo prints now:\n{printed}"
                )  # fmt: skip
    return out


def test_every_console_block_of_the_tutorial_matches_the_demo(tmp_path: Path) -> None:
    tutorial = TUTORIAL.read_text("utf-8")
    assert console_blocks(tutorial), "the tutorial shows no console block"
    log, copy = _run_demo(tmp_path)
    (tmp_path / "demo.log").write_text(log, "utf-8")
    found = stale(tutorial, log, str(copy))
    assert not found, "tutorial console blocks that no longer match:\n\n" + "\n\n".join(found)
