"""Probe: did only the manifest's own files change between the pinned commit and HEAD?

Layer: probes and runtime - probe (edge).  ``lock`` pins the training code's HEAD, and
committing the locked manifest moves HEAD, so an exact-commit check refuses
forever after the natural "lock, then commit the manifest" workflow.  This
probe answers the looser question a caller may accept instead: HEAD descends
from the pinned commit, and the pinned commit's tree and HEAD's tree differ
only in allowed paths (the manifest, its envelope and run records, and the
files it pins by digest).

Trees are compared, not commits, so a change made and reverted in between is
fine, and a merge that brings in any other file is not.  It costs three git
calls on the way to "ok" (one when the commits are the same), all through
:func:`ftmanifest.probe._git_env.git_context`: no shell, a timeout, no optional
locks, C locale, no replace refs.

What "allowed" means:

* A path is judged as the repository names it, never through a symlink.
  Allowed filesystem paths are mapped to repository paths lexically, below the
  repository root as git reports it, its real path, or the ancestor of
  ``repo_root`` that is the same folder.  A symlink committed at an allowed
  path may change (its content is the link text; what it points at is judged
  under its own name), so a data path that is a link to ``train.py`` never
  allows ``train.py`` to change.  Callers must therefore not resolve symlinks
  *inside* the repository when building the allowed set: ``Path.resolve()`` on
  such a data path yields ``.../train.py`` and would allow exactly that.
* An allowed folder allows everything below it, except the repository root
  itself (or anything above it), which allows nothing: "everything may change"
  is not an answer this probe gives.  Paths outside the repository are ignored.
* A changed submodule (gitlink) is always offending, allowed or not: its
  content is another repository's commit, which no digest here covers.
  ``--ignore-submodules=none`` stops a ``.gitmodules`` ``ignore=all`` from
  hiding it.
* Renames are a deletion plus an addition (``--no-renames``), so renaming an
  allowed file to any other name offends with the new name.  A mode change
  (``chmod +x``) is a change.
* A path git prints in bytes that are not UTF-8 cannot be compared reliably
  and always offends.
* With ``other_manifests``, another manifest's file (its manifest or envelope,
  a manifest on both sides: ``other_manifests.between_commits``) is allowed:
  locking and committing one manifest of a repository does not move the code
  of the others.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ftmanifest.manifest.patterns import COMMIT_RE
from ftmanifest.probe._command import CommandResult
from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe._git_env import GitFailed, git_context
from ftmanifest.probe.other_manifests import Side, between_commits

AncestryReason = Literal[
    "same commit",
    "only allowed files changed",
    "not a commit id",
    "git not found",
    "not a git repository",
    "pinned commit not in this repository",
    "head commit not in this repository",
    "not a descendant",
    "other files changed",
    "git error",
]
MAX_OFFENDING = 20
GITLINK_MODE = "160000"
SHALLOW_HINT = "this is a shallow clone; 'git fetch --unshallow' brings the missing history"


@dataclass(frozen=True)
class AncestryResult:
    """The verdict of :func:`descends_with_only`; only ``ok`` is ever trusted."""

    ok: bool
    reason: AncestryReason
    offending: tuple[str, ...] = ()
    """The first ``MAX_OFFENDING`` changed paths that are not allowed, relative
    to the repository root, '/'-separated, in git's order."""
    offending_count: int = 0
    """How many changed paths are not allowed (``offending`` may be cut short)."""
    note: str | None = None
    """Git's own words on an error, or a hint such as the shallow-clone one."""


def descends_with_only(
    repo_root: Path,
    pinned: str,
    head: str,
    allowed: Collection[Path],
    *,
    ctx: ProbeContext | None = None,
    refuse: Callable[[str], bool] | None = None,
    other_manifests: bool = False,
) -> AncestryResult:
    """Whether ``head`` descends from ``pinned`` and their trees differ only in ``allowed``.

    ``refuse`` names, among the paths ``allowed`` covers, those that still
    count as changed (a folder allowed for its records, not for a script).
    ``other_manifests``: another manifest's files may change too (see the
    module doc).

    ``repo_root`` is any folder of the work tree; ``pinned`` and ``head`` are
    40-hex commit ids; ``allowed`` holds absolute files and folders (relative
    ones are taken under ``repo_root``).  ``ctx`` supplies the environment and
    timeout (a default ``ProbeContext`` when None).  Never raises for git's
    sake: a missing git, a timeout or an error is a refusal with a reason.
    """
    git = git_context(ctx if ctx is not None else ProbeContext())
    for name, rev in (("pinned", pinned), ("head", head)):
        if not COMMIT_RE.match(rev):
            return _refuse("not a commit id", f"{name} {rev!r} is not a 40-hex commit id")
    cwd = str(repo_root)
    if not Path(repo_root).is_dir():
        return _refuse("not a git repository", f"{cwd} is not a folder")
    both = git.run(
        [
            "git",
            "rev-parse",
            "--is-shallow-repository",
            "--show-toplevel",
            f"{pinned}^{{commit}}",
            f"{head}^{{commit}}",
        ],
        cwd=cwd,
    )
    if not both.ok:
        return _unresolved(git, cwd, pinned, head, both)
    lines = both.stdout.split("\n")
    shallow = lines[0] == "true"
    # The top is printed raw and may itself hold newlines: the ids are the last lines.
    top, seen = "\n".join(lines[1:-3]), tuple(lines[-3:-1])
    if seen != (pinned, head):
        return _refuse("not a commit id", "an id names a tag or other object, not a commit")
    if pinned == head:
        return AncestryResult(True, "same commit")

    ancestry = git.run(["git", "merge-base", "--is-ancestor", pinned, head], cwd=cwd)
    if ancestry.found and ancestry.returncode == 1:
        return _refuse("not a descendant", SHALLOW_HINT if shallow else None)
    if not ancestry.ok:
        return _refuse("git error", ancestry.error)

    diff = git.run(
        [
            "git",
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--ignore-submodules=none",
            pinned,
            head,
        ],
        cwd=cwd,
    )
    if not diff.ok:
        return _refuse("git error", diff.error)
    inside = repo_paths(allowed, repo_tops(top, Path(repo_root)), base=Path(repo_root))
    entries = parse_raw_entries(diff.stdout)
    bad = [
        (path, old, new)
        for path, old, new in entries
        if GITLINK_MODE in (old.mode, new.mode)
        or not path_allowed(inside, path)
        or (refuse is not None and refuse(path))
    ]
    if bad and other_manifests:
        candidates = [b for b in bad if GITLINK_MODE not in (b[1].mode, b[2].mode)]
        if refuse is not None:
            candidates = [b for b in candidates if not refuse(b[0])]
        try:
            theirs = between_commits(cwd, candidates, git)
        except GitFailed:
            theirs = set()  # cannot read them: they count as changed
        bad = [b for b in bad if b[0] not in theirs]
    if bad:
        paths = [path for path, _old, _new in bad]
        return AncestryResult(False, "other files changed", tuple(paths[:MAX_OFFENDING]), len(bad))
    return AncestryResult(True, "only allowed files changed")


def parse_raw_z(text: str) -> list[tuple[str, bool]]:
    """(path, is a gitlink on either side) of each entry of ``git diff-tree -r -z`` raw output."""
    return [
        (path, GITLINK_MODE in (old.mode, new.mode)) for path, old, new in parse_raw_entries(text)
    ]


def parse_raw_entries(text: str) -> list[tuple[str, Side, Side]]:
    """(path, old side, new side) of each entry of ``git diff-tree -r -z`` raw output.

    A record is ``:<old mode> <new mode> <old id> <new id> <status>`` then one
    path (two for a rename or copy, whose both names are returned), each ended
    by NUL.  A side that git writes as all zeros (the file is absent there) has
    no blob and no mode; its mode is ``000000``.
    """
    tokens = text.split("\0")
    out: list[tuple[str, Side, Side]] = []
    i = 0
    while i < len(tokens):
        meta = tokens[i]
        i += 1
        if not meta.startswith(":"):
            continue
        fields = meta[1:].split(" ")
        old, new = (_side(fields[n], fields[n + 2]) for n in (0, 1))
        count = 2 if fields[-1][:1] in ("R", "C") else 1
        out.extend((path, old, new) for path in tokens[i : i + count])
        i += count
    return out


def _side(mode: str, oid: str) -> Side:
    return Side(oid, mode) if mode.strip("0") else Side(None, None)


def repo_paths(allowed: Iterable[Path], tops: Iterable[str], *, base: Path) -> frozenset[str]:
    """The repository paths ('/'-separated, below the root) of the ``allowed`` filesystem paths.

    Lexical: no symlink below a top is followed.  A path that is a top, lies
    above one, or lies outside every top gives nothing.
    """
    prefixes = [top if top.endswith(os.sep) else top + os.sep for top in tops]
    out: set[str] = set()
    for path in allowed:
        full = os.path.normpath(os.path.join(os.path.abspath(base), os.fspath(path)))
        for prefix in prefixes:
            if full.startswith(prefix) and len(full) > len(prefix):
                out.add(full[len(prefix) :].replace(os.sep, "/"))
    return frozenset(out)


def path_allowed(inside: frozenset[str], path: str) -> bool:
    if "\ufffd" in path:  # not UTF-8 on disk: cannot be told apart from a look-alike
        return False
    while path:
        if path in inside:
            return True
        path = path.rpartition("/")[0]
    return False


def repo_tops(top: str, repo_root: Path) -> set[str]:
    """The spellings of the repository root: git's, its real path, and the caller's."""
    real = os.path.realpath(top)
    tops = {os.path.normpath(top), real}
    here = os.path.normpath(os.path.abspath(repo_root))
    while True:
        if os.path.realpath(here) == real:
            tops.add(here)
            break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return tops


def _unresolved(
    git: ProbeContext, cwd: str, pinned: str, head: str, failed: CommandResult
) -> AncestryResult:
    """Why ``rev-parse`` of the two commits failed (only on the refusing path)."""
    if not failed.found:
        return _refuse("git not found", failed.error)
    if failed.returncode is None:  # timed out, or could not start
        return _refuse("git error", failed.error)
    repo = git.run(["git", "rev-parse", "--is-shallow-repository"], cwd=cwd)
    if not repo.ok:
        kind: AncestryReason = "git error"
        if "not a git repository" in repo.stderr.lower():
            kind = "not a git repository"
        return _refuse(kind, repo.error)
    hint = SHALLOW_HINT if repo.stdout.strip() == "true" else None
    for rev, kind in (
        (pinned, "pinned commit not in this repository"),
        (head, "head commit not in this repository"),
    ):
        known = git.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=cwd)
        if known.found and known.returncode == 1:
            return _refuse(kind, hint)
        if not known.ok:
            return _refuse("git error", known.error)
    return _refuse("git error", failed.error)


def _refuse(reason: AncestryReason, note: str | None = None) -> AncestryResult:
    return AncestryResult(False, reason, note=note)
