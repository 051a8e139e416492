"""Run one external tool for a probe: no shell, a short timeout, never raise.

Layer: probes and runtime - probe (edge).  A missing tool, a tool that hangs, or one
that fails is an observation ("no NVIDIA driver seen"), not an error, so every outcome
comes back as a :class:`CommandResult`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CommandResult:
    """What happened when a tool was run."""

    argv: tuple[str, ...]
    found: bool
    """The executable was found on PATH."""
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    """Why there is no usable output: 'not found', 'timed out after 10s', ..."""

    @property
    def ok(self) -> bool:
        return self.found and self.error is None and self.returncode == 0


def run_command(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    cwd: str | None = None,
) -> CommandResult:
    """Run ``argv`` (first item looked up on ``environ['PATH']``) and capture text."""
    env = dict(os.environ if environ is None else environ)
    args = tuple(argv)
    exe = shutil.which(args[0], path=env.get("PATH", ""))
    if exe is None:
        return CommandResult(args, found=False, error=f"{args[0]} not found on PATH")
    try:
        proc = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [exe, *args[1:]],
            capture_output=True,
            timeout=timeout,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return CommandResult(args, found=True, error=f"timed out after {timeout:g}s")
    except OSError as exc:
        return CommandResult(args, found=True, error=f"could not run: {exc.strerror or exc}")
    stdout = proc.stdout.decode("utf-8", errors="replace")
    stderr = proc.stderr.decode("utf-8", errors="replace")
    error = None
    if proc.returncode != 0:
        first = (stderr.strip() or stdout.strip()).splitlines()
        error = f"exit {proc.returncode}" + (f": {first[0][:200]}" if first else "")
    return CommandResult(args, True, proc.returncode, stdout, stderr, error)
