"""supervise: real commands, real signals, and no process left behind.

The helpers here (a training-like child with a grandchild, starting a
supervisor, waiting for it) are also used by ``run_cli_test``.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from ftmanifest.errors import CommandNotFoundError, CommandNotRunnableError
from ftmanifest.output import error_text
from ftmanifest.supervise import supervise
from tests.conftest import ROOT

# A training-like command: it starts a grandchild in its process group that
# ignores SIGTERM/SIGINT/SIGHUP, writes "PID GRANDCHILD_PID" to OUT/pids, then
# waits.  MODE checkpoint: SIGTERM/SIGINT/SIGHUP take 0.5 s, write OUT/marker
# (the signal number) and exit 0, SIGUSR1 writes OUT/usr1; ignore: ignores
# them; exit: exits 0 at once, leaving the grandchild behind.
CHILD = """\
import os, signal, subprocess, sys, time
from pathlib import Path

out, mode = Path(sys.argv[1]), sys.argv[2]
GRAND = (
    "import signal, time\\n"
    "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\\n"
    "    signal.signal(s, signal.SIG_IGN)\\n"
    "print('ready', flush=True)\\n"
    "time.sleep(60)\\n"
)


def checkpoint(signum, frame):
    time.sleep(0.5)
    (out / "marker").write_text(str(signum))
    sys.exit(0)


if mode == "checkpoint":
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, checkpoint)
    signal.signal(signal.SIGUSR1, lambda s, f: (out / "usr1").write_text(""))
elif mode == "ignore":
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
grand = subprocess.Popen([sys.executable, "-c", GRAND], stdout=subprocess.PIPE)
assert grand.stdout.readline() == b"ready\\n"
(out / "pids.tmp").write_text(f"{os.getpid()} {grand.pid}")
(out / "pids.tmp").replace(out / "pids")
if mode != "exit":
    time.sleep(60)
"""

# supervise() in a process of its own, so the signals a test sends never reach pytest.
DRIVER = (
    "import os, sys\n"
    "from ftmanifest.supervise import supervise\n"
    "sys.exit(supervise(sys.argv[2:], os.environ, grace=float(sys.argv[1])))\n"
)


def child_command(tmp_path: Path, mode: str) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return [sys.executable, str(script), str(tmp_path), mode]


@contextmanager
def started(
    argv: Sequence[str],
    out: Path,
    *,
    ignored: Sequence[signal.Signals] = (),
    pythonpath: bool = True,
) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """Start a supervisor (``argv``) of ``child_command``; wait for the child's
    pids; on the way out, kill whatever a failed test left running.  ``pythonpath``:
    the project's folder on PYTHONPATH (a driver imports the tests); ``ftmanifest run``
    needs none, and refuses a start-up variable its manifest does not pin."""

    def dispositions() -> None:  # as a shell would start it, whatever pytest inherited
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN if sig in ignored else signal.SIG_DFL)

    env = {**os.environ, "PYTHONPATH": str(ROOT)} if pythonpath else dict(os.environ)
    env.pop("FTMANIFEST_DEBUG", None)
    proc = subprocess.Popen(
        list(argv),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=dispositions,
    )
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not (out / "pids").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                stdout, stderr = proc.communicate(timeout=10)
                pytest.fail(f"the child never started (exit {proc.returncode}):\n{stdout}{stderr}")
            time.sleep(0.02)
        pids.extend(int(p) for p in (out / "pids").read_text().split())
        yield proc, pids
    finally:
        for pgid in (proc.pid, *pids[:1]):  # our new session; the child's group
            _kill_group(pgid)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def finish(proc: subprocess.Popen[str], timeout: float = 20) -> tuple[int, str]:
    """Wait for the supervisor; its exit code and stderr."""
    _, stderr = proc.communicate(timeout=timeout)
    return proc.returncode, stderr


def stderr_until(proc: subprocess.Popen[str], text: str, timeout: float = 10) -> str:
    """Read the supervisor's stderr until ``text`` shows (before ``finish``)."""
    assert proc.stderr is not None
    fd, seen, deadline = proc.stderr.fileno(), b"", time.monotonic() + timeout
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{text!r} not in stderr: {seen.decode()!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"stderr closed before {text!r}: {seen.decode()!r}"
            seen += chunk
    return seen.decode()


def assert_gone(*pids: int, timeout: float = 5) -> None:
    """Each pid has ended: no such process, or a zombie left for init to reap."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while not _gone(pid):
            assert time.monotonic() < deadline, f"process {pid} is still running"
            time.sleep(0.02)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _driver(grace: float, command: Sequence[str]) -> list[str]:
    return [sys.executable, "-c", DRIVER, str(grace), *command]


# -- in this process: exit codes, errors, and what supervise leaves behind ----


def test_exit_code_and_environment_pass_through() -> None:
    code = "import os, sys; sys.exit(int(os.environ['CODE']))"
    assert supervise([sys.executable, "-c", code], {**os.environ, "CODE": "5"}, grace=1) == 5


@pytest.mark.parametrize(("name", "expected"), [("TERM", 143), ("KILL", 137), ("USR1", 138)])
def test_death_by_signal_n_is_128_plus_n(name: str, expected: int) -> None:
    assert supervise(["sh", "-c", f"kill -{name} $$"], os.environ, grace=1) == expected


def test_missing_and_unexecutable_commands_are_shell_codes(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("echo hi\n")
    (tmp_path / "badint").write_text("#!/no/such/interpreter\n")
    (tmp_path / "badint").chmod(0o755)
    cases = {
        "no-such-command": (CommandNotFoundError, "command not found", 127),
        str(tmp_path / "absent"): (CommandNotFoundError, "no such file", 127),
        str(tmp_path / "plain"): (CommandNotRunnableError, "permission denied", 126),
        str(tmp_path): (CommandNotRunnableError, "is a directory", 126),
        str(tmp_path / "badint"): (CommandNotRunnableError, "bad interpreter", 126),
    }
    for command, (kind, reason, exit_code) in cases.items():
        with pytest.raises(kind) as info:
            supervise([command], os.environ, grace=1)
        assert info.value.exit_code == exit_code
        assert error_text(info.value) == f"cannot run {command!r}: {reason}"
    assert isinstance(info.value, OSError)


def test_signal_handlers_and_wakeup_fd_are_restored() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)}
    assert supervise(["true"], os.environ, grace=1) == 0
    assert {s: signal.getsignal(s) for s in before} == before
    assert signal.set_wakeup_fd(-1) == -1


def test_leftovers_of_the_group_die_when_the_command_exits(tmp_path: Path) -> None:
    assert supervise(child_command(tmp_path, "exit"), os.environ, grace=1) == 0
    leader, grandchild = map(int, (tmp_path / "pids").read_text().split())
    try:
        assert_gone(leader, grandchild)
    finally:
        _kill_group(leader)


# -- in a process of its own: signals sent to the supervisor -------------------


def test_a_second_sigterm_kills_at_once(tmp_path: Path) -> None:
    with started(_driver(30, child_command(tmp_path, "ignore")), tmp_path) as (proc, pids):
        os.kill(proc.pid, signal.SIGTERM)
        stderr_until(proc, "SIGTERM passed on to the command; SIGKILL in 30 s")
        os.kill(proc.pid, signal.SIGTERM)
        code, stderr = finish(proc, timeout=10)
        assert code == 137, stderr
        assert "SIGTERM again: killing the command (SIGKILL)" in stderr
        assert_gone(*pids)


def test_an_ignored_signal_stays_ignored_and_usr1_goes_to_the_command_alone(
    tmp_path: Path,
) -> None:
    argv = _driver(30, child_command(tmp_path, "checkpoint"))
    with started(argv, tmp_path, ignored=[signal.SIGHUP]) as (proc, pids):
        os.kill(proc.pid, signal.SIGHUP)  # as under nohup: neither we nor the child hear it
        os.kill(proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not (tmp_path / "usr1").exists():
            assert time.monotonic() < deadline and proc.poll() is None, finish(proc)
            time.sleep(0.02)
        time.sleep(0.1)
        assert not _gone(pids[1])  # the grandchild would have died of SIGUSR1
        os.kill(proc.pid, signal.SIGTERM)
        assert finish(proc) == (
            0,
            "ftmanifest: SIGTERM passed on to the command; SIGKILL in "
            "30 s unless it ends (SIGINT or SIGTERM again: now)\n",
        )
        assert (tmp_path / "marker").read_text() == str(int(signal.SIGTERM))
        assert_gone(*pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_z_stops_the_command_and_fg_continues_it(tmp_path: Path) -> None:
    with started(_driver(1, child_command(tmp_path, "ignore")), tmp_path) as (proc, pids):
        os.kill(proc.pid, signal.SIGTSTP)
        deadline = time.monotonic() + 10
        while {_state(proc.pid), _state(pids[0]), _state(pids[1])} != {"T"}:
            assert time.monotonic() < deadline, "not stopped"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGCONT)
        while "T" in {_state(proc.pid), _state(pids[0]), _state(pids[1])}:
            assert time.monotonic() < deadline, "not continued"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGTERM)
        assert finish(proc)[0] == 137
        assert_gone(*pids)


# Reads a line from the terminal, then counts the SIGINTs that reach it.
AT_A_TERMINAL = """\
import signal, sys, time
count = 0
def on_int(signum, frame):
    global count
    count += 1
signal.signal(signal.SIGINT, on_int)
print("read", input(), flush=True)
deadline = time.monotonic() + 10
while not count and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.3)
print("sigints", count, flush=True)
"""


def test_at_a_terminal_the_command_reads_it_and_gets_one_sigint_per_ctrl_c() -> None:
    import pty

    argv = _driver(5, [sys.executable, "-c", AT_A_TERMINAL])
    pid, master = pty.fork()  # the supervisor leads a session with the pty as its terminal
    if pid == 0:  # pragma: no cover - the forked child execs at once
        # as a terminal's shell starts it: a worker that inherited SIGINT ignored passes
        # that on across exec, and a supervisor started so rightly passes nothing on
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execve(argv[0], argv, {**os.environ, "PYTHONPATH": str(ROOT)})
    status = None
    try:
        os.write(master, b"hello\n")
        seen = _terminal_until(master, b"", b"read hello")
        os.write(master, b"\x03")  # Ctrl-C
        seen = _terminal_until(master, seen, b"sigints ")
        seen = _terminal_until(master, seen, b"\r\n", after=seen.index(b"sigints "))
        assert b"sigints 1\r\n" in seen, seen  # exactly one, though both see the terminal
        status = os.waitpid(pid, 0)[1]
        assert os.waitstatus_to_exitcode(status) == 0, seen
    finally:
        os.close(master)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _terminal_until(master: int, seen: bytes, text: bytes, *, after: int = 0) -> bytes:
    """Read the terminal until ``text`` shows in it after offset ``after`` (a loaded
    machine starts an interpreter in seconds)."""
    deadline = time.monotonic() + 30
    while text not in seen[after:]:
        left = deadline - time.monotonic()
        assert left > 0, f"{text!r} not on the terminal: {seen!r}"
        if select.select([master], [], [], left)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the other side closed
                chunk = b""
            assert chunk, f"terminal closed before {text!r}: {seen!r}"
            seen += chunk
    return seen
