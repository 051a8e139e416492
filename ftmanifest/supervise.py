"""Run a command as a careful supervisor: pass signals on, bound the shutdown,
leave nothing behind.

Layer: probes and runtime (stdlib only).  ``ftmanifest run`` hands the training command to
``supervise`` once the manifest verified; this module spawns it, waits, and
turns how it ended into an exit code.

Where the command runs (POSIX).  In a new session (``setsid``), so in its own
process group whose id is its pid; every signal goes to that whole group, so
the command's own children (data loader workers, a shell's pipeline) get it
too.  The session has no controlling terminal, yet the command still reads and
writes the terminal through the stdin/stdout/stderr it inherits, and because
job control only concerns a process's *controlling* terminal it never stops on
SIGTTIN/SIGTTOU: ``input()``, pdb, getpass and progress bars work; only
opening ``/dev/tty`` fails.  The alternatives were worse: a new process group
in our session stops (SIGTTIN) the first time the command reads stdin; making
that group the terminal's foreground group (``tcsetpgrp``, as tini does) sends
Ctrl-C straight to the command, past the grace period, and after Ctrl-Z leaves
a stopped group holding the terminal unless we re-implement a shell's job
control.  So Ctrl-C, Ctrl-\\ and Ctrl-Z at a terminal reach only ``ftmanifest
run`` (the foreground group), which passes them on: the command's group gets
exactly one SIGINT per Ctrl-C, as if the shell had started it.  Ctrl-Z stops
the group (SIGSTOP: the kernel discards SIGTSTP sent to an orphaned group,
which the command's is) and then ``ftmanifest run``; ``fg`` or ``bg``
continue both.

Signals.  SIGHUP, SIGINT, SIGQUIT and SIGTERM are passed on and start the grace
period; if the command has not ended when it is over, its group gets SIGKILL.
A second SIGINT or SIGTERM during the grace period kills at once (the "press
Ctrl-C again to give up" convention); a repeated SIGHUP or SIGQUIT is only
passed on.  SIGWINCH (a terminal resize) is passed on to the group, SIGUSR1
and SIGUSR2 (a scheduler's "checkpoint now") to the command alone: they have
no terminal meaning, and their default action would kill helpers such as data
loader workers that do not handle them.  A signal that was ignored
when we started (``nohup``, ``&`` in a script) stays ignored, and the command
inherits the ignore, as from a shell.  A stopping signal that arrives before
the command is spawned means it is not started (exit 128+N); one that arrives
while it is being spawned is passed on as soon as it exists.

The end.  When the command (the group leader) has ended, whatever is left of
its group is SIGKILLed, after a normal exit too: nothing outlives ``run``, and
a command that wants its children to finish waits for them.  We do this while
the leader is an unreaped zombie (``waitid(WNOWAIT)``), which keeps its group
id from being reused; macOS has no ``os.waitid``, so there the group is killed
just after reaping (a negligible race).  Descendants that left the group
(``setsid``, a shell with job control) are not followed; that takes a cgroup.
The exit status is the command's own, as ``timeout``, ``tini`` and
``dumb-init`` report it: its exit code, or 128+N when signal N ended it (143
SIGTERM, 137 SIGKILL, 130 SIGINT); a SIGTERM handler that checkpoints and
exits 0 gives 0.

Waiting.  Signal handlers only note the signal: ``signal.set_wakeup_fd`` writes
each one's number to a pipe, SIGCHLD included, and the loop ``select``s on it
with the grace deadline as timeout.  No polling, no window between checking
the child and going to sleep, and EINTR is retried by Python (PEP 475).

On Windows: a plain ``subprocess.call``.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from types import FrameType
from typing import Any

from ftmanifest.errors import CommandNotFoundError, CommandNotRunnableError

DEFAULT_GRACE = 30.0
_SIGNAL_BASE = 128  # a shell's convention: killed by signal N -> 128 + N


def supervise(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    grace: float,
    stopped: list[signal.Signals] | None = None,
) -> int:
    """Run ``command`` with ``env`` until it ends and return its exit status
    (128+N when signal N ended it).  Must be called from the main thread.

    ``stopped``, when given, receives the stopping signal (SIGINT, SIGTERM,
    SIGHUP, SIGQUIT) that was passed on, if any: a run asked to stop is
    abandoned even when the command then exits 0.

    Raises ``CommandNotFoundError`` (127) or ``CommandNotRunnableError`` (126)
    when it cannot be started.
    """
    if not command:
        raise ValueError("supervise() needs a command")
    if not grace >= 0:
        raise ValueError(f"grace must be >= 0 seconds, not {grace}")
    if os.name != "posix":
        try:
            return subprocess.call(list(command), env=dict(env))
        except OSError as exc:
            raise _not_runnable(command[0], exc) from None
    supervisor = _Supervisor(command, env, grace)
    try:
        return supervisor.run()
    finally:
        if stopped is not None and supervisor.asked is not None:
            stopped.append(supervisor.asked)


def _not_runnable(name: str, exc: OSError) -> CommandNotRunnableError:
    """The error for a failed exec, with a shell's exit codes and wording."""
    if exc.errno == errno.ENOENT:
        if os.sep not in name:
            return CommandNotFoundError(name, "command not found", errno=exc.errno)
        if os.path.lexists(name):  # the file is there; its #! interpreter is not
            return CommandNotRunnableError(name, "bad interpreter", errno=exc.errno)
        return CommandNotFoundError(name, "no such file", errno=exc.errno)
    if os.path.isdir(name):
        reason = "is a directory"
    elif exc.errno == errno.ENOEXEC:
        reason = "exec format error (a script needs a #! line)"
    else:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
    return CommandNotRunnableError(name, reason, errno=exc.errno)


def _signals(*names: str) -> tuple[signal.Signals, ...]:
    return tuple(getattr(signal, n) for n in names if hasattr(signal, n))


def _note(signum: int, frame: FrameType | None) -> None:
    """The handler: the wakeup fd already carries the signal number."""


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone


def _drain(fd: int) -> Iterator[signal.Signals]:
    while True:
        try:
            data = os.read(fd, 512)
        except BlockingIOError:
            return
        for byte in data:
            try:
                yield signal.Signals(byte)
            except ValueError:
                continue


class _Supervisor:
    def __init__(self, command: Sequence[str], env: Mapping[str, str], grace: float) -> None:
        self.command = list(command)
        self.env = dict(env)
        self.grace = grace
        self.stopping = _signals("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM")
        self.passed_on = _signals("SIGUSR1", "SIGUSR2", "SIGWINCH")
        self.to_leader = _signals("SIGUSR1", "SIGUSR2")
        self.proc: subprocess.Popen[bytes] | None = None
        self.asked: signal.Signals | None = None  # the first stopping signal passed on
        self.deadline: float | None = None
        self.killed = False

    def run(self) -> int:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        old_handlers: dict[signal.Signals, Any] = {}
        try:
            for sig in (signal.SIGCHLD, signal.SIGTSTP, *self.stopping, *self.passed_on):
                if sig != signal.SIGCHLD and signal.getsignal(sig) is signal.SIG_IGN:
                    continue
                old_handlers[sig] = signal.signal(sig, _note)
            early = [s for s in _drain(read_fd) if s in self.stopping]
            if early:
                self.asked = early[0]
                _say(f"{early[0].name} before the command started: not starting it")
                return _SIGNAL_BASE + early[0]
            try:
                self.proc = subprocess.Popen(self.command, env=self.env, start_new_session=True)
            except OSError as exc:
                raise _not_runnable(self.command[0], exc) from None
            return self._wait(self.proc, read_fd)
        finally:
            if self.proc is not None and self.proc.returncode is None:  # only on a bug
                _killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            for sig, handler in old_handlers.items():
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)
            signal.set_wakeup_fd(old_wakeup)
            os.close(read_fd)
            os.close(write_fd)

    def _wait(self, proc: subprocess.Popen[bytes], read_fd: int) -> int:
        while not _ended(proc):
            timeout = None
            if self.deadline is not None:
                timeout = self.deadline - time.monotonic()
                if timeout <= 0:
                    self._kill(f"not ended {self.grace:g} s after {self._asked_name()}")
                    continue
            select.select([read_fd], [], [], timeout)
            for sig in _drain(read_fd):
                self._on_signal(proc.pid, sig)
        _killpg(proc.pid, signal.SIGKILL)  # what is left of the group
        code = proc.wait()
        return _SIGNAL_BASE - code if code < 0 else code

    def _on_signal(self, pgid: int, sig: signal.Signals) -> None:
        if sig == signal.SIGCHLD or self.killed:
            return
        if sig == signal.SIGTSTP:
            _killpg(pgid, signal.SIGSTOP)
            os.kill(os.getpid(), signal.SIGSTOP)  # until `fg` or `bg`
            _killpg(pgid, signal.SIGCONT)
        elif sig in self.to_leader:
            os.kill(pgid, sig)  # the unreaped leader: its pid is not reused yet
        elif sig in self.passed_on:
            _killpg(pgid, sig)
        elif self.asked is None:
            self.asked = sig
            self.deadline = time.monotonic() + self.grace
            _say(  # said first: what the command prints on the signal comes after it
                f"{sig.name} passed on to the command; SIGKILL in {self.grace:g} s "
                "unless it ends (SIGINT or SIGTERM again: now)"
            )
            _killpg(pgid, sig)
        elif sig in (signal.SIGINT, signal.SIGTERM):
            self._kill(f"{sig.name} again")
        else:
            _killpg(pgid, sig)

    def _kill(self, why: str) -> None:
        assert self.proc is not None
        _say(f"{why}: killing the command (SIGKILL)")
        _killpg(self.proc.pid, signal.SIGKILL)
        self.killed = True
        self.deadline = None

    def _asked_name(self) -> str:
        return self.asked.name if self.asked is not None else "the signal"


def _ended(proc: subprocess.Popen[bytes]) -> bool:
    """Has the command ended?  Leaves it unreaped where the OS allows, so its
    pid stays its group's id until we have killed what is left of the group."""
    if not hasattr(os, "waitid"):  # macOS
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _say(text: str) -> None:
    sys.stderr.write(f"ftmanifest: {text}\n")
    sys.stderr.flush()
