"""A fork server for CLI tests: each call runs in a real, separate process that
skips the interpreter's start-up and the package's imports.

Layer: test support.  ``python -m tests.support.cli_fork`` imports
``ftmanifest.cli`` and builds the full parser once (every command module), then
forks one child per request.  The child takes the caller's environment, umask
and folder, points fds 0/1/2 at /dev/null and two fresh pipes, puts back the
signal handlers the interpreter started with, calls ``ftmanifest.cli:entry``
(what ``python -m ftmanifest`` and the console script call), waits for its
non-daemon threads, runs the atexit handlers, flushes and ``os._exit``\\ s with
the code; the server waits for it under a deadline and kills its process group
when it passes.  Requests and answers are JSON lines on the server's stdin and
stdout.  ``tests.conftest.run_cli_forked`` is the client.

What a forked child shares with the server that a fresh interpreter would not
(the audit behind ``unsound``):

- State computed at import.  ``ftmanifest`` reads no environment variable at
  module level and caches none in an ``lru_cache``'d function (an AST scan of
  the package on 2026-12-06 found one, a dataclass ``default_factory``, which runs
  at call time).  Dependencies may; so the server records every key read from
  ``os.environ`` while it imports (``import_env``; not the width argparse's help
  formatter reads while the parser is built: that formatter is dropped, and help
  builds its own in the child) and a call whose environment
  differs from the server's in one of them, in a ``PYTHON*``/``LC_*``/``LD_*``/
  ``MALLOC_*`` variable, ``LANG``/``LANGUAGE`` (read once at start-up: stream
  encodings, the loader) or ``TMPDIR``/``TEMP``/``TMP`` (``tempfile`` caches
  its folder) runs in a fresh interpreter instead.  Had an import copied the
  whole environment, every call with a changed environment would.
- ``sys.argv`` (set per child), ``sys.path[0]`` (set to the child's folder, as
  ``-m`` does), umask (sent), signal handlers (restored), stdin (/dev/null here;
  ``run_cli`` inherits the test's, which under pytest reads nothing either).
- Logging configuration and warnings filters: the server checks after its
  imports that no handler was added and the filters are the start-up ones, and
  refuses to serve otherwise.
- Random state: ``random`` reseeds itself in a forked child
  (``os.register_at_fork``); NumPy's global generator does not and is not
  imported by the server (checked: NumPy would bring thread pools too).
- Threads: a fork copies only the calling thread, so the server must have one;
  it counts ``/proc/self/task`` after its imports and refuses otherwise.
- The hash seed is the server's for every child (fresh interpreters draw one
  each): output that depends on set order is stable here, not across runs.
- A module shadowed by a file in the child's folder is found by a fresh
  interpreter only if it was not imported by the server already.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import importlib
import importlib.util
import json
import os
import selectors
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

UNSOUND_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_")
UNSOUND_NAMES = frozenset({"LANG", "LANGUAGE", "TMPDIR", "TEMP", "TMP", "FTMANIFEST_DEBUG"})
ENTRY = "ftmanifest.cli:entry"


def unsound(changed: set[str], import_env: set[str], copied: bool) -> set[str]:
    """The keys among ``changed`` that a forked child cannot honour like a fresh one."""
    if copied and changed:
        return set(changed)
    return {
        k
        for k in changed
        if k in import_env or k in UNSOUND_NAMES or k.startswith(UNSOUND_PREFIXES)
    }


# --- server ---------------------------------------------------------------------


@contextmanager
def _env_reads() -> Iterator[tuple[set[str], list[bool]]]:
    """Record the keys read from ``os.environ`` (and whether it was iterated)."""
    cls = type(os.environ)
    get, it = cls.__getitem__, cls.__iter__
    keys: set[str] = set()
    copied = [False]

    def getitem(self: Any, key: str) -> str:
        if not _read_by_help_formatter():
            keys.add(key)
        return get(self, key)

    def iterate(self: Any) -> Iterator[str]:
        copied[0] = True
        return it(self)

    cls.__getitem__, cls.__iter__ = getitem, iterate  # type: ignore[method-assign]
    try:
        yield keys, copied
    finally:
        cls.__getitem__, cls.__iter__ = get, it  # type: ignore[method-assign]


def _read_by_help_formatter() -> bool:
    """Whether argparse's ``HelpFormatter()`` is reading (``COLUMNS``, ``LINES``, through
    ``shutil.get_terminal_size``).  ``add_argument`` builds one to check each argument and
    drops it; help and usage build their own when they print, in the child, so the
    width read while the parser is built is kept nowhere.  Recorded, it sent every call
    with its own ``COLUMNS`` (the ledger's tests, all of them) to a fresh interpreter."""
    frame = sys._getframe(2)
    for _ in range(4):  # getitem <- get_terminal_size <- HelpFormatter.__init__
        if frame is None:
            return False
        if frame.f_code is argparse.HelpFormatter.__init__.__code__:
            return True
        frame = frame.f_back
    return False


def _preload() -> dict[str, Any]:
    import logging
    import warnings

    filters, handlers = list(warnings.filters), list(logging.root.handlers)
    with _env_reads() as (keys, copied):
        cli = importlib.import_module("ftmanifest.cli")
        cli.build_parser()
    threads = len(os.listdir("/proc/self/task"))
    problems = []
    if threads != 1 or threading.active_count() != 1:
        problems.append(f"{threads} threads after the imports")
    if "numpy" in sys.modules or "torch" in sys.modules:
        problems.append("numpy or torch imported")
    if warnings.filters != filters or logging.root.handlers != handlers:
        problems.append("warnings filters or logging handlers changed by an import")
    return {"import_env": sorted(keys), "copied": copied[0], "problems": problems}


def _child(req: dict[str, Any], out: int, err: int, handlers: dict[signal.Signals, Any]) -> int:
    """Become the command; the exit code (never returns to the server loop)."""
    os.setpgid(0, 0)
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (null, out, err):
        os.close(fd)
    env = req["env"]
    for key in [k for k in os.environ if k not in env]:
        del os.environ[key]
    os.environ.update(env)
    os.umask(req["umask"])
    os.chdir(req["cwd"])
    sys.path[0] = req["cwd"]
    sys.argv = [req["argv0"], *req["argv"]]
    module, _, name = req.get("entry", ENTRY).partition(":")
    try:
        getattr(importlib.import_module(module), name)()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # what the interpreter does with an uncaught exception
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = 120  # what the interpreter returns when its final flush fails
    return code


def _collect(pid: int, out: int, err: int, timeout: float) -> dict[str, Any]:
    """Read the child's output and status; kill its group past ``timeout``."""
    deadline = time.monotonic() + timeout
    chunks: dict[int, list[bytes]] = {out: [], err: []}
    sel = selectors.DefaultSelector()
    for fd in (out, err):
        sel.register(fd, selectors.EVENT_READ)
    timed_out = False
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        for key, _ in sel.select(left):
            data = os.read(key.fd, 65536)
            if data:
                chunks[key.fd].append(data)
            else:
                sel.unregister(key.fd)
    while not timed_out:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            timed_out = True
        time.sleep(0.005)
    if timed_out:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status = os.waitpid(pid, 0)
    sel.close()
    os.close(out)
    os.close(err)
    return {
        "returncode": os.waitstatus_to_exitcode(status),
        "stdout": base64.b64encode(b"".join(chunks[out])).decode(),
        "stderr": base64.b64encode(b"".join(chunks[err])).decode(),
        "timed_out": timed_out,
        "pid": pid,
    }


def serve() -> None:
    fixed = (signal.SIGKILL, signal.SIGSTOP)  # no handler can be set for these
    handlers = {s: signal.getsignal(s) for s in signal.valid_signals() if s not in fixed}
    handlers = {s: h for s, h in handlers.items() if h is not None}
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    for fd in (0, 1):  # the children's, not the protocol's
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, fd)
        os.close(null)
    hello = {"pid": os.getpid(), **_preload()}
    answers.write(json.dumps(hello).encode() + b"\n")
    answers.flush()
    for line in requests:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                requests.close()
                answers.close()
                os.close(out_r)
                os.close(err_r)
                code = _child(req, out_w, err_w, handlers)
            finally:
                os._exit(code)
        os.close(out_w)
        os.close(err_w)
        answer = _collect(pid, out_r, err_r, req["timeout"])
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()


# --- client ---------------------------------------------------------------------


class ForkServer:
    """One server process; ``call`` sends one request and waits for its answer."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        import subprocess

        self.env = env
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.cli_fork"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin, self.proc.stdout
        hello = self._read()
        if hello["problems"]:
            self.close()
            raise RuntimeError(f"cli fork server: {'; '.join(hello['problems'])}")
        self.pid: int = hello["pid"]
        self.import_env: set[str] = set(hello["import_env"])
        self.copied: bool = hello["copied"]

    def _read(self) -> dict[str, Any]:
        line = self._out.readline()
        if not line:
            raise RuntimeError(f"cli fork server ended (exit {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def unsound(self, env: dict[str, str]) -> set[str]:
        changed = {k for k in env.keys() | self.env.keys() if env.get(k) != self.env.get(k)}
        return unsound(changed, self.import_env, self.copied)

    def call(
        self, argv: list[str], env: dict[str, str], cwd: str, timeout: float, entry: str = ENTRY
    ) -> tuple[int, bytes, bytes, bool]:
        """(returncode, stdout, stderr, timed out) of one forked run."""
        umask = os.umask(0o022)
        os.umask(umask)
        req = {"argv": argv, "env": env, "cwd": cwd, "timeout": timeout, "umask": umask,
               "entry": entry, "argv0": _main_path()}  # fmt: skip
        self._in.write(json.dumps(req).encode() + b"\n")
        self._in.flush()
        a = self._read()
        out, err = base64.b64decode(a["stdout"]), base64.b64decode(a["stderr"])
        return a["returncode"], out, err, a["timed_out"]

    def close(self) -> None:
        self._in.close()
        self.proc.wait(timeout=30)
        self._out.close()


def _main_path() -> str:
    """What ``sys.argv[0]`` is under ``python -m ftmanifest``: the ``__main__`` file."""
    spec = importlib.util.find_spec("ftmanifest.__main__")
    return str(spec.origin) if spec and spec.origin else "ftmanifest"


_server: list[ForkServer] = []


def server(env_factory: Callable[[], dict[str, str]], root: str) -> ForkServer:
    """This process's server, started on first use."""
    if not _server:
        _server.append(ForkServer(env_factory(), root))
    return _server[0]


def shutdown() -> None:
    """End this process's server, if one was started."""
    while _server:
        _server.pop().close()


# --- entries for the server's own tests (already imported in the server) ----------


def block_on_fifo() -> None:
    """Start a grandchild in this process group, then block reading a FIFO."""
    import subprocess

    fifo, pid_file = sys.argv[1:]
    sleeper = subprocess.Popen(["sleep", "60"])
    with open(pid_file, "w") as f:
        f.write(str(sleeper.pid))
    with open(fifo, "rb") as f:  # no writer: blocks until killed
        f.read()


def boom() -> None:
    raise RuntimeError("boom in the entry")


if __name__ == "__main__":
    serve()
