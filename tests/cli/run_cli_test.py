"""``ftmanifest run M -- CMD`` end to end: the real entry point in a fresh
interpreter, a clean locked manifest, real commands and real signals.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.supervise_test import assert_gone, child_command, finish, started

FTM = [sys.executable, "-m", "ftmanifest", "run"]


def _ignored(project: Path) -> Path:
    """A folder inside the repository that git ignores: a script there is inside the
    pinned repository (``run`` refuses one outside it) and leaves the tree clean."""
    out = project.parent / "out"
    out.mkdir(exist_ok=True)
    return out


def _run(manifest: Path, *command: str, options: tuple[str, ...] = ()) -> tuple[int, str]:
    result = run_cli("run", str(manifest), "--no-signature", *options, "--", *command)
    return result.returncode, result.stderr


def test_a_missing_command_is_127_in_one_line(project: Path) -> None:
    code, stderr = _run(project, "no-such-command", "--flag")
    assert code == 127
    expected = "ftmanifest: error: cannot run 'no-such-command': command not found"
    assert _last_line(stderr) == expected


def test_a_file_that_is_not_executable_is_126(project: Path, tmp_path: Path) -> None:
    script = _ignored(project) / "train.sh"  # the repo must stay clean
    script.write_text("#!/bin/sh\necho never\n")
    code, stderr = _run(project, str(script))
    assert code == 126
    assert _last_line(stderr) == f"ftmanifest: error: cannot run '{script}': permission denied"


def _last_line(stderr: str) -> str:
    """The one line after verify's warnings; no traceback, nothing after it."""
    assert "Traceback" not in stderr and stderr.endswith("\n"), stderr
    return stderr.splitlines()[-1]


@pytest.mark.parametrize(("name", "expected"), [("TERM", 143), ("KILL", 137)])
def test_a_command_killed_by_a_signal_is_128_plus_n(
    project: Path,
    name: str,
    expected: int,
) -> None:
    assert _run(project, "sh", "-c", f"kill -{name} $$", options=("--guarded",))[0] == expected


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_is_passed_on_and_the_handler_finishes(
    project: Path,
    tmp_path: Path,
    sig: signal.Signals,
) -> None:
    out = _ignored(project)
    argv = [*FTM, str(project), "--no-signature", "--", *child_command(out, "checkpoint")]
    with started(argv, out, pythonpath=False) as (proc, pids):
        os.kill(proc.pid, sig)
        code, stderr = finish(proc)
        assert code == 0, stderr  # the command's own status: its handler exited 0
        assert (out / "marker").read_text() == str(int(sig))
        assert f"{sig.name} passed on to the command" in stderr
        assert_gone(*pids)  # the grandchild ignored the signal: it was killed with the group


@pytest.mark.parametrize(
    ("sig", "option", "env"),
    [
        (signal.SIGTERM, ("--grace", "1"), {}),
        (signal.SIGINT, ("--grace", "1"), {}),
        (signal.SIGTERM, (), {"FTMANIFEST_GRACE": "1"}),
    ],
)
def test_a_command_that_ignores_the_signal_is_killed_after_the_grace(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sig: signal.Signals,
    option: tuple[str, ...],
    env: dict[str, str],
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    argv = [*FTM, str(project), "--no-signature", *option, "--"]
    out = _ignored(project)
    with started([*argv, *child_command(out, "ignore")], out, pythonpath=False) as (proc, pids):
        start = time.monotonic()
        os.kill(proc.pid, sig)
        code, stderr = finish(proc)
        assert code == 137, stderr
        assert 1 <= time.monotonic() - start < 10
        assert f"not ended 1 s after {sig.name}: killing the command (SIGKILL)" in stderr
        assert_gone(*pids)


def test_refused_exit_sets_the_code_of_every_refusal(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = ("sh", "-c", f"touch {marker}")
    (project.parent / "data" / "test.jsonl").write_text("changed\n")
    assert _run(project, *command, options=("--refused-exit", "99"))[0] == 99
    code, stderr = _run(tmp_path / "absent.yaml", *command, options=("--refused-exit", "99"))
    assert code == 99 and "Traceback" not in stderr
    assert _run(project, *command)[0] == 1  # without it: 1 for drift, as before
    assert not marker.exists()


def test_bad_grace_and_refused_exit_values_are_usage_errors(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for option in (("--grace", "-1"), ("--grace", "soon"), ("--refused-exit", "127")):
        code, stderr = _run(project, "true", options=option)
        assert code == 2 and option[0] in stderr
    monkeypatch.setenv("FTMANIFEST_GRACE", "soon")
    code, stderr = _run(project, "true")
    assert code == 2 and "FTMANIFEST_GRACE is not a number of seconds" in stderr


def test_a_command_without_the_separator_is_told_where_to_put_it(
    project: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    result = run_cli("run", str(project), "python", "train.py")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    expected = f"put -- before the command: ftmanifest run {project} -- python train.py"
    assert expected in result.stderr, result.stderr
    # the command is everything from its first word on, run's own options included;
    # an option's value is never echoed (as argparse's unrecognized arguments)
    result = run_cli("run", str(project), "sh", "my script.sh", "-c", f"touch {marker}",
                     "--no-signature")  # fmt: skip
    assert result.returncode == 2
    expected = f"ftmanifest run {project} -- sh 'my script.sh' -c ... --no-signature\n"
    assert expected in result.stderr, result.stderr
    assert str(marker) not in result.stderr and not marker.exists()


def test_an_unknown_option_of_run_is_still_an_unrecognized_argument(project: Path) -> None:
    result = run_cli("run", str(project), "--no-such-option", "--", "true")
    assert result.returncode == 2
    assert "unrecognized arguments: --no-such-option" in result.stderr
    assert "put --" not in result.stderr
    result = run_cli("verify", str(project), "python")  # not run: no separator to suggest
    assert result.returncode == 2 and "unrecognized arguments: python" in result.stderr
    assert "put --" not in result.stderr


def test_a_command_after_the_separator_is_started(project: Path) -> None:
    code, stderr = _run(project, "no-such-command", "train.py")
    assert code == 127 and "put --" not in stderr  # started: not found, as a shell says
