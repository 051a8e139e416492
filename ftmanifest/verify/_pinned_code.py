"""The pinned commit's blobs, for judging the repository files an interpreter imported.

Layer: judging rooms (verify), a private helper of ``verify.interpreter`` over
``probe.git_content``.  A file of the training repository is the pinned code
only if its raw bytes (no filter, no index flag consulted) hash to the blob id
the pinned commit's tree gives for its path; a path the commit does not have
is untracked or ignored code.  Blob ids go through the stat cache as the work
tree's content comparison keeps them (``probe.git_blobs``), so one file read
serves both.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ftmanifest.probe import ProbeContext, git_context, own_repository, run_git
from ftmanifest.probe.git_blobs import format_of, observe_blobs
from ftmanifest.probe.git_content import GITLINK, GitFailed, TrackedBlob, tracked_blobs
from ftmanifest.statcache import StatCache

__all__ = ["GITLINK", "GitFailed", "PinnedTree", "ignored", "pinned_tree", "worktree_blob"]


@dataclass(frozen=True)
class PinnedTree:
    """A commit's tree at a work tree's root: '/'-separated path -> (mode, object id)."""

    root: str
    commit: str
    entries: dict[str, TrackedBlob]

    @property
    def object_format(self) -> str:
        return format_of(self.commit)


def _git() -> ProbeContext:
    return own_repository(git_context(ProbeContext()))


def pinned_tree(root: str, commit: str) -> PinnedTree:
    """``commit``'s tree in the repository at ``root``; GitFailed when git cannot list it."""
    return PinnedTree(root, commit, tracked_blobs(root, commit, ctx=_git()))


def ignored(root: str, rels: Iterable[str]) -> set[str]:
    """The paths among ``rels`` that git's ignore rules ignore (for a row's words only)."""
    names = list(rels)
    if not names:
        return set()
    stdin = b"\0".join(os.fsencode(n) for n in names) + b"\0"
    try:
        out = run_git(_git(), ["check-ignore", "--no-index", "-z", "--stdin"], root, stdin)
    except GitFailed:  # exit 1: none of them is ignored
        return set()
    return {os.fsdecode(n) for n in out.split(b"\0") if n}


def worktree_blob(tree: PinnedTree, rel: str, cache: StatCache | None) -> str:
    """The blob id of the work tree's ``rel`` as it is now, or what is there in words."""
    _mode, oid = observe_blobs(tree.root, [rel], tree.object_format, cache)[rel]
    return oid if oid is not None else _mode
