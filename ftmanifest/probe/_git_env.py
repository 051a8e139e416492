"""How every probe runs git: no optional locks, C locale, no replace refs.

Layer: probes and runtime.  Shared by the git probe (``git``), the content
comparison (``git_content``) and the ancestry check (``git_ancestry``), so that
one change here reaches every git call.  ``run_git`` is for output that must
stay bytes (file names as the file system has them) or that needs stdin.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Iterable

from ftmanifest.probe._context import ProbeContext

# Variables that would point git at another repository, index or object store
# than the folder's.
GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE",
                "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES")  # fmt: skip
# For run_git: no fsmonitor hook (it could tell git a changed folder is unchanged)
# and no untracked cache: untracked files are listed by a walk of the folders.
_NO_HOOKS = ("-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false")


def git_context(ctx: ProbeContext) -> ProbeContext:
    """``ctx`` set up for running git: no optional locks, C locale (output is
    parsed), and objects as stored rather than as ``refs/replace`` rewrites them.

    Every git call of the probes goes through the context this returns.
    """
    env = dict(ctx.environ)
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["LC_ALL"] = "C"
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    return dataclasses.replace(ctx, environ=env)


def own_repository(ctx: ProbeContext) -> ProbeContext:
    """``ctx`` without the variables that point git at another repository, for
    asking a folder (a submodule) about itself."""
    env = {k: v for k, v in ctx.environ.items() if k not in GIT_ENV_DROP}
    return dataclasses.replace(ctx, environ=env)


class GitFailed(Exception):
    """A git command of this module failed; its message is git's words."""


def run_git(ctx: ProbeContext, args: Iterable[str], cwd: str, stdin: bytes | None = None) -> bytes:
    """``git args`` in ``cwd`` with ``ctx``'s environment: its stdout as bytes, or GitFailed."""
    exe = shutil.which("git", path=ctx.environ.get("PATH", ""))
    if exe is None:
        raise GitFailed("git not found on PATH")
    argv = [exe, *_NO_HOOKS, *args]
    try:
        proc = subprocess.run(  # noqa: S603 - fixed argv, no shell
            argv,
            cwd=cwd,
            env=dict(ctx.environ),
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            timeout=ctx.timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git {' '.join(args)} timed out after {ctx.timeout:g}s") from None
    except OSError as exc:
        raise GitFailed(f"could not run git: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        words = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitFailed(f"git exit {proc.returncode}" + (f": {words[0][:200]}" if words else ""))
    return proc.stdout
