"""The progress line and ``-q/--quiet``: drawn on a terminal, silent off one and with -q.

The commands that read a lot (lock and verify hashing, scan, data check, backup
create, restore) run as the real console script with stderr on a pseudo-terminal
(``pty``) and ``FTMANIFEST_PROGRESS_DELAY=0``, so a few small files draw the line
a multi-GB file draws after a second.  The controls run the same command with
stderr on a pipe, with ``TERM=dumb`` and with ``-q``: no line, the same exit code.
"""

from __future__ import annotations

import argparse
import io
import os
import pty
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ftmanifest import progress
from ftmanifest.cli import COMMANDS, NESTED, build_parser, split_passthrough
from ftmanifest.output import note
from ftmanifest.progress import DELAY, Progress, progress_delay, quieted, render_line
from tests.cli.cli_help_test import _commands, examples


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


# --- the bar and the switch -----------------------------------------------------


def test_a_bar_that_counts_files_shows_their_share_and_the_bytes_read() -> None:
    line = render_line("scanning", 3 << 20, 0, 1.0, unit="files", items=(1, 4))
    assert line == "scanning  1 / 4 files  3.0 MiB   25%  3.0 MiB/s  ETA 3s"
    assert render_line("data check", 1024, 0, 2.0, unit="records", items=(1200, 0)) == (
        "data check  1,200 records  1.0 KiB  512 B/s"
    )


def test_quiet_stops_the_bar_and_the_notes_and_is_restored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TERM", "xterm")
    with quieted(True):
        assert not Progress(stream=FakeTTY()).enabled
        assert not progress.live(FakeTTY())
        note("wrote x")
    assert capsys.readouterr().err == ""
    assert Progress(stream=FakeTTY()).enabled  # control: the same terminal, not quiet
    note("wrote x")
    assert capsys.readouterr().err == "wrote x\n"
    monkeypatch.setenv("TERM", "dumb")
    assert not Progress(stream=FakeTTY()).enabled


def test_the_delay_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FTMANIFEST_PROGRESS_DELAY", "0.25")
    assert progress_delay() == 0.25 and Progress(stream=FakeTTY()).delay == 0.25
    monkeypatch.setenv("FTMANIFEST_PROGRESS_DELAY", "soon")
    assert progress_delay() == DELAY  # unreadable: the default, never a crash
    monkeypatch.delenv("FTMANIFEST_PROGRESS_DELAY")
    assert progress_delay() == DELAY == 1.0


# --- -q on every command ----------------------------------------------------------


WALKED = [(path, p) for path, p in _commands(build_parser()) if path]


def test_every_command_in_the_registry_is_walked() -> None:
    tops = {path[0] for path, _ in WALKED if len(path) == 1}
    assert tops == set(COMMANDS)
    nested = {(cmd, sub) for cmd, subs in NESTED.items() for sub in subs}
    assert nested <= {path for path, _ in WALKED}


@pytest.mark.parametrize(("path", "parser"), WALKED, ids=[" ".join(p) for p, _ in WALKED])
def test_every_command_takes_quiet(path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    assert {"-q", "--quiet"} <= set(parser._option_string_actions)
    assert "-q, --quiet" in parser.format_help()
    leaves = [argv for argv in examples(parser) if argv[1 : 1 + len(path)] == list(path)]
    for argv in leaves[:1]:  # its first example, with -q after the command's name
        words, _ = split_passthrough([*path, "-q", *argv[1 + len(path) :]])
        assert build_parser().parse_args(words).quiet is True, argv
        plain, _ = split_passthrough(argv[1:])
        assert build_parser().parse_args(plain).quiet is False


def test_quiet_before_the_command_and_after_a_nested_one() -> None:
    parser = build_parser()
    assert parser.parse_args(["-q", "lint", "m.yaml"]).quiet is True
    assert parser.parse_args(["backup", "-q", "check", "d"]).quiet is True
    assert parser.parse_args(["backup", "check", "d", "--quiet"]).quiet is True
    assert parser.parse_args(["backup", "check", "d"]).quiet is False


# --- the real CLI on a terminal -----------------------------------------------------


@dataclass(frozen=True)
class Ran:
    code: int
    stderr: str  # what the terminal (or the pipe) got
    stdout: str


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "FTMANIFEST_PROGRESS_DELAY": "0", "TERM": "xterm", **extra}
    env.pop("FTMANIFEST_DEBUG", None)
    return env


def on_terminal(argv: list[str], cwd: Path, **env: str) -> Ran:
    """``ftmanifest ARGV`` with stderr on a pseudo-terminal (stdout on a pipe)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ftmanifest", *argv], cwd=cwd, env=_env(**env),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
        )  # fmt: skip
    finally:
        os.close(slave)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    got = bytearray()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            got += chunk
    finally:
        os.close(master)
    code = proc.wait(timeout=60)
    reader.join(60)
    return Ran(code, got.decode("utf-8", "replace"), b"".join(out).decode())


def on_pipe(argv: list[str], cwd: Path, **env: str) -> Ran:
    done = subprocess.run(
        [sys.executable, "-m", "ftmanifest", *argv], cwd=cwd, env=_env(**env),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return Ran(done.returncode, done.stderr, done.stdout)


def _keys(folder: Path) -> dict[str, Path | str]:
    """A signing key, the allowed_signers file trusting it, an age identity and its
    recipient: what ``backup create`` and ``restore`` need."""
    import pyrage

    from ftmanifest.signing.keys import generate_key_pair, load_private_key, public_key_line

    folder.mkdir()
    key = folder / "signing"
    generate_key_pair(key, comment="progress-test")
    line = public_key_line(load_private_key(key).public_key(), "progress-test")
    trust = folder / "allowed_signers"
    trust.write_text(f'me namespaces="ftmanifest" {line}\n', encoding="utf-8")
    identity = pyrage.x25519.Identity.generate()
    age_key = folder / "key.txt"
    fd = os.open(age_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(f"{identity}\n")
    return {"key": key, "trust": trust, "identity": age_key, "recipient": str(identity.to_public())}


@pytest.fixture
def backed_up(project: Path, tmp_path: Path) -> dict[str, Path | str]:
    """The project's model backed up (through the CLI, on a pipe): its metadata file."""
    import json

    keys = _keys(tmp_path / "keys")
    made = on_pipe(
        ["backup", "create", "model", "--to", str(tmp_path / "backups"), "--key",
         str(keys["key"]), "-r", str(keys["recipient"]), "--format", "json"],
        project.parent,
    )  # fmt: skip
    assert made.code == 0, made.stderr
    return {**keys, "meta": json.loads(made.stdout)["metadata"]}


# (command line, the label its line starts with); ``{...}`` are filled from the fixtures
LONG_WORK = {
    "lock": (["lock", "exp.yaml", "--no-cache", "--dry-run"], "hashing"),
    "verify": (["verify", "exp.yaml", "--no-cache", "--no-signature", "--no-scan"], "hashing"),
    "scan": (["scan", "data", "model", "--no-cache"], "scanning"),
    "data check": (["data", "check", "exp.yaml"], "data check"),
    "backup create": (
        [
            "backup",
            "create",
            "model",
            "data",
            "--to",
            "{tmp}/more",
            "--key",
            "{key}",
            "-r",
            "{recipient}",
        ],
        "backup",
    ),  # fmt: skip
    "restore": (
        ["restore", "{meta}", "--to", "{tmp}/{dest}", "-i", "{identity}", "--trust", "{trust}"],
        "restore",
    ),
}


def _argv(name: str, fill: dict[str, Path | str], dest: str) -> tuple[list[str], str]:
    words, label = LONG_WORK[name]
    return [w.format(**fill, dest=dest) for w in words], label


@pytest.mark.parametrize("name", list(LONG_WORK))
def test_long_work_shows_progress_on_a_terminal_only(
    name: str, project: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # only backup create and restore read the keys and the backup (made through the CLI)
    backup = "{key}" in LONG_WORK[name][0] or "{meta}" in LONG_WORK[name][0]
    fill = {**(request.getfixturevalue("backed_up") if backup else {}), "tmp": tmp_path}
    argv, label = _argv(name, fill, "on-tty")
    shown = on_terminal(argv, project.parent)
    assert f"\r{label}  " in shown.stderr, shown.stderr  # the line, drawn in place
    assert "B/s" in shown.stderr

    argv, _ = _argv(name, fill, "on-pipe")
    piped = on_pipe(argv, project.parent)
    assert piped.code == shown.code, piped.stderr
    assert f"{label}  " not in piped.stderr and "B/s" not in piped.stderr

    argv, _ = _argv(name, fill, "quiet")
    quiet = on_terminal([*argv, "-q"], project.parent)
    assert quiet.code == shown.code, quiet.stderr
    assert "B/s" not in quiet.stderr and f"\r{label}  " not in quiet.stderr


def test_a_dumb_terminal_gets_no_line(project: Path) -> None:
    argv, _ = LONG_WORK["scan"]
    dumb = on_terminal(argv, project.parent, TERM="dumb")
    assert dumb.code == 0 and "B/s" not in dumb.stderr
    assert "file(s) scanned" in dumb.stderr  # control: the summary note still comes


def test_quiet_drops_the_notes_and_keeps_errors_and_the_result(project: Path) -> None:
    noisy = on_pipe(["lock", "exp.yaml"], project.parent)
    assert noisy.code == 0 and "already locked" in noisy.stderr  # control: the note
    quiet = on_pipe(["lock", "-q", "exp.yaml"], project.parent)
    assert quiet.code == 0 and quiet.stderr == ""

    refused = on_pipe(["-q", "lock", "missing.yaml"], project.parent)
    assert refused.code == 2 and "error:" in refused.stderr  # errors are still printed

    scanned = on_pipe(["scan", "-q", "data", "--format", "json"], project.parent)
    assert scanned.code == 0 and scanned.stderr == "" and scanned.stdout.startswith("{")


def test_quiet_drops_what_init_says_it_wrote(project: Path) -> None:
    noisy = on_pipe(["init", "new.yaml"], project.parent)
    assert noisy.code == 0 and "wrote new.yaml" in noisy.stderr  # control: the note
    quiet = on_pipe(["init", "-q", "newer.yaml"], project.parent)
    assert quiet.code == 0 and quiet.stderr == ""
    assert (project.parent / "newer.yaml").is_file()  # the file, still


# --- the bar itself --------------------------------------------------------------


def test_progress_draws_only_on_a_tty_after_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    now = [0.0]
    tty = FakeTTY()
    bar = Progress(stream=tty, delay=1.0, clock=lambda: now[0])
    bar.add_total(4 << 20)
    bar.advance(1 << 20)
    assert tty.getvalue() == ""  # quick work stays silent
    now[0] = 2.0
    bar.advance(1 << 20)
    assert tty.getvalue().startswith("\rhashing  2.0 MiB / 4.0 MiB   50%  1.0 MiB/s  ETA 2s")
    bar.close()
    assert tty.getvalue().endswith("\r")

    pipe = io.StringIO()
    quiet = Progress(stream=pipe, delay=0.0)
    quiet.add_total(10)
    quiet.advance(10)
    quiet.close()
    assert pipe.getvalue() == "" and quiet.done == 10


def test_render_line_without_total() -> None:
    assert render_line("hashing", 0, 0, 0.0) == "hashing  0 B / 0 B  0 B/s"
