"""The README's five-minute path prints what the commands print today (issue 30).

Its ``sh`` set-up block runs in a scratch folder, then every ``console`` block of
the section, command by command, in the folder the set-up ends in: each
``$ COMMAND`` runs in bash with its output (stdout and stderr together) compared
with the lines under it.  What differs from run to run is folded on both sides
before comparing (digests, key fingerprints, times, attempt ids, hours, how many
lines lock changed, the scratch folder's path) and so are runs of spaces (a
table's column widths follow its values); a line ``...`` stands for any number
of lines.  A README that shows
an output the tool no longer prints fails here, so the docs stay true.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytest.importorskip("transformers")  # the path runs a real Trainer

SECTION = "## Five minutes"
_FOLD = [
    (re.compile(r"sha256:[0-9a-f]{64}"), "sha256:<hex>"),
    (re.compile(r"sha256:[0-9a-f]{4}…[0-9a-f]{4}"), "sha256:<short>"),
    (re.compile(r"SHA256:[A-Za-z0-9+/]{43}"), "SHA256:<key>"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?Z?"), "<time>"),
    (re.compile(r"^[0-9a-f]{12}(?= )", re.M), "<attempt>"),
    (re.compile(r"\b\d+\.\d{3}\b"), "<n.nnn>"),
    # how many lines lock changes follows the machine (packages, variables set)
    (re.compile(r"\(\d+ line\(s\) changed\)"), "(<n> line(s) changed)"),
    (re.compile(r"[ \t]+"), " "),
]


def _fold(text: str, scratch: str) -> str:
    text = text.replace(scratch, "<scratch>")
    for pattern, replacement in _FOLD:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def _blocks(readme: str) -> tuple[str, list[list[str]]]:
    """(the set-up ``sh`` block, every ``console`` block as lines) of the section."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end >= 0 else None]
    setup = re.search(r"```sh\n(.*?)```", section, re.S)
    assert setup is not None, "the five-minute section has no sh set-up block"
    consoles = [b.splitlines() for b in re.findall(r"```console\n(.*?)```", section, re.S)]
    return setup.group(1), consoles


def _commands(block: list[str]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for line in block:
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            assert out, f"output before any command: {line!r}"
            out[-1][1].append(line)
    return out


def _matches(expected: list[str], actual: str) -> bool:
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(line) + r"\n" for line in expected
    )
    return re.fullmatch(pattern, actual + "\n" if actual else "") is not None


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
        for command, expected in _commands(block):
            ran = subprocess.run(
                ["bash", "-c", command + " 2>&1"],
                cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            actual = _fold(ran.stdout, str(scratch))
            want = [_fold(line, str(scratch)) for line in expected]
            if not _matches(want, actual):
                stale.append(
                    f"$ {command}\n--- README shows:\n" + "\n".join(expected)
                    + f"\n--- it prints now:\n{ran.stdout}"
                )  # fmt: skip
    assert not stale, "README console blocks that no longer match:\n\n" + "\n\n".join(stale)
