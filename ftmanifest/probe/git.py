"""Probe: git commit and dirty state of the training code.

Layer: probes and runtime.  Finds the work tree root and HEAD, then compares
the work tree with HEAD by content (``git_content``): what git's index flags,
filters or submodule settings would hide from ``git status`` is seen.  Git
runs without a shell and without taking the index lock (GIT_OPTIONAL_LOCKS=0),
so probing never races a user's git.

Untracked files count as dirty: a new script the run imports is not in the
commit, so the commit alone cannot reproduce the run.  Files git ignores do
not count (checkpoints, caches and outputs usually are ignored).
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe._git_env import GIT_ENV_DROP, git_context
from ftmanifest.probe.git_ancestry import path_allowed, repo_paths, repo_tops
from ftmanifest.probe.git_content import ContentChange, compare_worktree

GitStatus = Literal["ok", "no-commits", "not-a-repo", "no-git", "error"]


@dataclass(frozen=True)
class GitState:
    status: GitStatus
    commit: str | None = None
    """40-hex HEAD commit."""
    dirty: bool = False
    """Tracked changes or untracked files are present."""
    changed: int = 0
    """Number of paths that differ (tracked changes + files the commit does not have)."""
    untracked: int = 0
    root: str | None = None
    note: str | None = None
    dirty_paths: tuple[str, ...] = ()
    """Paths (relative to ``root``) that differ from HEAD, an untracked folder as ``dir/``."""
    changes: tuple[ContentChange, ...] = ()
    """How each of ``dirty_paths`` differs: the commit's blob and what is here."""


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


# --- the one repository root finder --------------------------------------------

_GIT_TIMEOUT_S = 10.0
# Within one observation (``one_observation``): each folder's answer, asked once.
_ANSWERS: contextvars.ContextVar[dict[tuple[str, tuple[tuple[str, str], ...]], Any] | None] = (
    contextvars.ContextVar("ftmanifest_git_toplevel", default=None)
)


@contextmanager
def one_observation() -> Iterator[None]:
    """Within it, git is asked for a folder's work tree root once: verify's
    signature, code and ledger checks share the answer.  Outside it (a
    long-lived process between runs) every call asks again."""
    token = _ANSWERS.set({}) if _ANSWERS.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _ANSWERS.reset(token)


def show_toplevel(git: ProbeContext, folder: Path) -> Any:
    """``git rev-parse --show-toplevel`` run in ``folder`` (a ``CommandResult``)."""
    answers = _ANSWERS.get()
    environ = tuple(sorted((k, v) for k, v in git.environ.items() if k.startswith("GIT_")))
    key = (os.path.realpath(folder), environ)
    if answers is not None and key in answers:
        return answers[key]
    result = git.run(["git", "rev-parse", "--show-toplevel"], cwd=str(folder))
    if answers is not None:
        answers[key] = result
    return result


def repository_root(folder: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """The git work tree root holding ``folder`` as git decides it, or None
    (``GIT_DIR`` and its kind dropped: the folder's own repository)."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items()}
    for name in GIT_ENV_DROP:
        env.pop(name, None)
    git = git_context(ProbeContext(environ=env, timeout=_GIT_TIMEOUT_S))
    if not folder.is_dir():
        return None
    top = show_toplevel(git, folder)
    text = top.stdout.strip()
    return Path(text) if top.ok and text else None


def probe_dir(ctx: ProbeContext, folder: Path) -> GitState:
    """Git state of ``folder`` (any folder inside a work tree)."""
    git = git_context(ctx)
    if not folder.is_dir():
        return GitState("not-a-repo", root=str(folder), note="folder does not exist")
    top = show_toplevel(git, folder)
    if not top.found:
        return GitState("no-git", root=str(folder), note=top.error)
    if not top.ok:
        if "not a git repository" in top.stderr.lower():
            return GitState("not-a-repo", root=str(folder), note=top.error)
        return GitState("error", root=str(folder), note=top.error)
    root = top.stdout.strip() or str(folder)
    head = git.run(["git", "rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=root)
    commit = head.stdout.strip() if head.ok else None
    if not commit:  # nothing committed: every file is new
        status = git.run(["git", "status", "--porcelain", "--untracked-files=normal"], cwd=root)
        if not status.ok:
            return GitState("error", root=root, note=status.error)
        changed, untracked = parse_porcelain(status.stdout)
        paths = porcelain_paths(status.stdout)
        return GitState("no-commits", None, changed > 0, changed, untracked, root, None, paths)
    skip = None
    if ctx.digest_judged:
        judged = repo_paths(map(Path, ctx.digest_judged), repo_tops(root, folder), base=folder)
        skip = partial(path_allowed, judged)
    compared = compare_worktree(root, commit, ctx=git, use_cache=ctx.use_cache, skip=skip)
    if compared.error is not None:
        return GitState("error", root=root, note=compared.error)
    changes = compared.changes
    return GitState(
        status="ok",
        commit=commit,
        dirty=bool(changes),
        changed=len(changes),
        untracked=sum(1 for c in changes if c.kind == "untracked"),
        root=root,
        dirty_paths=tuple(c.path for c in changes),
        changes=changes,
    )


def probe(ctx: ProbeContext) -> GitState | None:
    """None when no training-code folder was given."""
    return None if ctx.root is None else probe_dir(ctx, Path(ctx.root))
