"""The light top level: ``ftmanifest --help``, ``--version``, no command and an
unknown command are answered from the registry's summaries, with no command
module imported; the answer is the one the full parser gives."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from ftmanifest.cli import COMMANDS, SUMMARIES, build_parser

ROOT = Path(__file__).resolve().parents[2]
COMMAND_MODULES = {f"ftmanifest.cli.{m}" for m in COMMANDS.values()}


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    actions = parser._subparsers._group_actions[0]  # type: ignore[union-attr]
    assert isinstance(actions, argparse._SubParsersAction)
    return {a.dest: a.help for a in actions._choices_actions}


def test_the_summaries_are_what_each_command_module_says() -> None:
    full = _summaries(build_parser())
    assert list(full) == list(COMMANDS)  # every command, in the registry's order
    assert full == SUMMARIES
    assert _summaries(build_parser(light=True)) == SUMMARIES


def test_the_light_help_is_the_full_help() -> None:
    assert build_parser(light=True).format_help() == build_parser().format_help()
    assert build_parser(light=True).format_usage() == build_parser().format_usage()


def _run(argvs: list[list[str]], tmp_path: Path) -> tuple[list[tuple[int, str]], set[str]]:
    """``ftmanifest ARGV`` for each ARGV, one after another in one fresh
    interpreter; each one's exit code and output, and the modules imported by
    the end."""
    seen = tmp_path / "seen.json"
    code = (
        "import contextlib, io, json, sys\n"
        "from ftmanifest.cli import main\n"
        "runs = []\n"
        f"for argv in {argvs!r}:\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n"
        "        try:\n"
        "            rc = main(argv)\n"
        "        except SystemExit as exc:\n"
        "            rc = exc.code\n"
        "    runs.append((rc, out.getvalue()))\n"
        f"open({str(seen)!r}, 'w').write(json.dumps([runs, sorted(sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr
    runs, modules = json.loads(seen.read_text())
    return [(rc, text) for rc, text in runs], set(modules)


TOP_LEVEL = [
    (["--help"], 0, "check manifests are fully pinned"),
    (["-h"], 0, "check manifests are fully pinned"),
    (["-q", "--help"], 0, "check manifests are fully pinned"),
    (["--version"], 0, "ftmanifest "),
    ([], 2, "the following arguments are required: COMMAND"),
    (["-q"], 2, "the following arguments are required: COMMAND"),
    (["--bogus"], 2, "the following arguments are required: COMMAND"),
    (["lnt", "exp.yaml"], 2, "invalid choice: 'lnt' (choose from 'init', 'lint',"),
]


def test_the_top_level_imports_no_command_module(tmp_path: Path) -> None:
    runs, modules = _run([argv for argv, _, _ in TOP_LEVEL], tmp_path)
    for (argv, code, shown), (rc, text) in zip(TOP_LEVEL, runs, strict=True):
        assert (rc, shown in text) == (code, True), (argv, text)
    assert not modules & COMMAND_MODULES, sorted(modules & COMMAND_MODULES)


def test_a_command_help_imports_that_command_alone(tmp_path: Path) -> None:
    """The control: ``COMMAND --help`` still builds that command's full parser."""
    [(rc, text)], modules = _run([["backup", "create", "--help"]], tmp_path)
    assert rc == 0, text
    assert "--archive-passphrase-env" in text
    assert modules & COMMAND_MODULES == {"ftmanifest.cli.backup"}


def test_a_command_still_runs_through_the_registry(tmp_path: Path) -> None:
    manifest = ROOT / "manifests" / "docroute-lora-r16.yaml"
    [(rc, text)], modules = _run([["lint", str(manifest)]], tmp_path)
    assert rc == 0, text
    assert modules & COMMAND_MODULES == {"ftmanifest.cli.lint"}
