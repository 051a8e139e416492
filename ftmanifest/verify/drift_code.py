"""Drift of the training code: the commit the manifest pins against the work tree.

Layer: judging rooms - pure core.  What flows through here is ``Observed``'s code state
(its commit, whether a later commit only touches the manifest and its pinned files,
and each tracked file whose content differs): a row per differing file, up to
``MAX_CODE_ROWS``, each with the git command that restores it, naming the index flag or
clean filter that hid the change.  It never runs git itself.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ftmanifest.findings import Finding
from ftmanifest.verify.drift_row import row

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.probe.git_content import ContentChange, TrackedBlob
    from ftmanifest.verify.observe import Observed


def _code(m: Manifest, seen: Observed) -> Iterator[Finding]:
    want = m.environment.code
    have = seen.environment.code
    ancestry = seen.code_ancestry
    if want.commit and want.commit != have.commit and not (ancestry and ancestry.ok):
        observed = have.commit or "no git commit found"
        if ancestry is not None:
            observed += f" ({ancestry.reason}"
            if ancestry.offending:
                more = ancestry.offending_count - len(ancestry.offending[:5])
                observed += ": " + ", ".join(ancestry.offending[:5])
                observed += f" and {more} more" if more > 0 else ""
            observed += ")"
        yield row(
            "drift.code",
            ("environment", "code", "commit"),
            "training code commit differs",
            want.commit,
            observed,
            f"git checkout {want.commit} (a later commit may change only the manifest "
            "and the files it pins by digest), or re-lock after review",
        )
    if want.commit and want.dirty:
        # Locked with uncommitted changes: nothing records what they were, so
        # no tree here (dirty or clean) can be judged to be the code that ran.
        yield row(
            "drift.code",
            ("environment", "code", "dirty"),
            "the manifest was locked with uncommitted changes: the code cannot be checked",
            "a manifest locked on a clean tree",
            _dirty_files(tuple(shown(c.path) for c in seen.code_dirty)) + " now"
            if have.dirty
            else "clean now",
            "commit the changes, then `ftmanifest lock` again",
        )
    elif want.commit and have.dirty:
        yield from code_rows(seen.code_dirty)


MAX_CODE_ROWS = 8  # files named one row each; the rest in one row
GITLINK = "160000"  # a submodule's mode in a git tree


def code_rows(changes: tuple[ContentChange, ...]) -> Iterator[Finding]:
    """A row per tracked file whose content differs (the first ``MAX_CODE_ROWS``),
    one for the rest, and one for the files the commit does not have."""
    tracked = [c for c in changes if c.expected is not None]
    extra = [c for c in changes if c.expected is None]
    for c in tracked[:MAX_CODE_ROWS]:
        yield row(
            "drift.code",
            ("environment", "code", "dirty"),
            f"training code {_CHANGE_WORDS[c.kind]}: {shown(c.path)}",
            _entry(c.expected),
            c.observed,
            _code_fix(c),
            path=shown(c.path),
        )
    rest = tracked[MAX_CODE_ROWS:]
    if rest:
        yield row(
            "drift.code",
            ("environment", "code", "dirty"),
            f"{len(rest)} more training code files differ from their commit",
            "the commit's content",
            _dirty_files(tuple(shown(c.path) for c in rest), label="differ"),
            "commit the changes and lock again, or restore them: git checkout -- <file>",
        )
    if extra or not changes:
        staged = all(c.kind == "staged" for c in extra) and extra
        yield row(
            "drift.code",
            ("environment", "code", "dirty"),
            "training code has files its commit does not have",
            "no file beyond the commit's (ignored files aside)",
            _dirty_files(
                tuple(shown(c.path) for c in extra), label="staged" if staged else "untracked"
            ),
            "commit them and lock again, or move them out of the repository",
        )


_CHANGE_WORDS = {
    "modified": "differs from its commit",
    "mode": "has another mode than in its commit",
    "missing": "is missing from the work tree",
    "type": "is another kind of file than in its commit",
    "unreadable": "cannot be read",
    "submodule": "submodule is at another commit",
}


def _entry(blob: TrackedBlob | None) -> str:
    if blob is None:
        return "absent"
    if blob.mode == GITLINK:
        return f"commit {blob.blob}"
    return f"blob {blob.blob} (mode {blob.mode})"


def _code_fix(c: ContentChange) -> str:
    """How to make ``c`` go away: the index flag or filter that hid it first."""
    p = shlex.quote(shown(c.path))
    assert c.expected is not None
    if c.expected.mode == GITLINK:
        if c.kind == "missing":
            return f"git submodule update --init {p}"
        return (f"git -C {p} checkout {c.expected.blob} (or commit the submodule's new "
                "commit and lock again)")  # fmt: skip
    first = "commit the change and lock again, or restore the committed file"
    restore = f"git checkout -- {p}"
    for flag in c.flags:
        if flag in ("skip-worktree", "assume-unchanged"):
            return (f"git update-index --no-{flag} {p} (git was told not to look at the "
                    f"file), then {first}: {restore}")  # fmt: skip
        if flag.startswith("filter="):
            return (f"the clean filter {flag[7:]!r} shows git other bytes than the file "
                    f"holds: {first}: git show HEAD:{p} > {p}")  # fmt: skip
    if c.kind == "missing":
        return f"restore it: {restore} (or commit its removal and lock again)"
    return f"{first}: {restore}"


def _dirty_files(paths: tuple[str, ...], limit: int = 8, label: str = "dirty") -> str:
    """``dirty: a.py, b.py and 3 more``: which files make the tree dirty."""
    if not paths:
        return label
    more = len(paths) - limit
    return f"{label}: " + ", ".join(paths[:limit]) + (f" and {more} more" if more > 0 else "")


def shown(path: str) -> str:
    """A repository path as a row shows it: a byte that is not UTF-8 as U+FFFD."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
