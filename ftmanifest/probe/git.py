"""Probe: git commit and dirty state of the training code.

Layer: probe (edge).  Runs ``git rev-parse HEAD`` and ``git status
--porcelain`` in the given folder, without a shell and without taking git's
index lock (GIT_OPTIONAL_LOCKS=0), so probing never races a user's git.

Untracked files count as dirty: a new script the run imports is not in the
commit, so the commit alone cannot reproduce the run.  Files git ignores do
not count (checkpoints, caches and outputs usually are ignored).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ftmanifest.probe._context import ProbeContext

GitStatus = Literal["ok", "no-commits", "not-a-repo", "no-git", "error"]


@dataclass(frozen=True)
class GitState:
    status: GitStatus
    commit: str | None = None
    """40-hex HEAD commit."""
    dirty: bool = False
    """Tracked changes or untracked files are present."""
    changed: int = 0
    """Number of 'git status --porcelain' lines (tracked changes + untracked)."""
    untracked: int = 0
    root: str | None = None
    note: str | None = None
    dirty_paths: tuple[str, ...] = ()
    """Paths (relative to ``root``) that 'git status --porcelain' lists."""


def porcelain_paths(text: str) -> tuple[str, ...]:
    """The path of each ``git status --porcelain`` v1 line (the new name of a rename)."""
    out = []
    for line in text.splitlines():
        if len(line) > 3:
            path = line[3:].split(" -> ")[-1]
            out.append(path[1:-1] if path.startswith('"') and path.endswith('"') else path)
    return tuple(out)


def parse_porcelain(text: str) -> tuple[int, int]:
    """(changed lines, untracked lines) of ``git status --porcelain`` v1 output."""
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines), sum(1 for line in lines if line.startswith("??"))


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


def probe_dir(ctx: ProbeContext, folder: Path) -> GitState:
    """Git state of ``folder`` (any folder inside a work tree)."""
    git = git_context(ctx)
    if not folder.is_dir():
        return GitState("not-a-repo", root=str(folder), note="folder does not exist")
    top = git.run(["git", "rev-parse", "--show-toplevel"], cwd=str(folder))
    if not top.found:
        return GitState("no-git", root=str(folder), note=top.error)
    if not top.ok:
        if "not a git repository" in top.stderr.lower():
            return GitState("not-a-repo", root=str(folder), note=top.error)
        return GitState("error", root=str(folder), note=top.error)
    root = top.stdout.strip() or str(folder)
    status = git.run(["git", "status", "--porcelain", "--untracked-files=normal"], cwd=root)
    if not status.ok:
        return GitState("error", root=root, note=status.error)
    changed, untracked = parse_porcelain(status.stdout)
    head = git.run(["git", "rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=root)
    commit = head.stdout.strip() if head.ok else None
    return GitState(
        status="ok" if commit else "no-commits",
        commit=commit or None,
        dirty=changed > 0,
        changed=changed,
        untracked=untracked,
        root=root,
        dirty_paths=porcelain_paths(status.stdout),
    )


def probe(ctx: ProbeContext) -> GitState | None:
    """None when no training-code folder was given."""
    return None if ctx.root is None else probe_dir(ctx, Path(ctx.root))
