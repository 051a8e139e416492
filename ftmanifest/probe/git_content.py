"""Probe: the work tree's bytes against a commit's blobs, hashed by ftmanifest itself.

Layer: probes and runtime.  ``git status`` reports what git's index and
configuration let it see: a file flagged ``skip-worktree`` or
``assume-unchanged``, a clean filter that turns the work tree's bytes into the
committed ones, an edit of the same size with its mtime put back under
``core.trustctime=false``, a submodule at another commit with ``ignore = all``
all leave it silent while the interpreter runs other code.  So the code is
compared by content: every entry of ``git ls-tree -r <commit>`` (mode, blob
id, path) against the git blob id of the work tree's raw bytes (a symlink by
its link text), computed here with no filter, mode changes and missing files
counted; every gitlink against the submodule's checked-out HEAD, then that
submodule's own work tree the same way.  No index flag, ``core.*`` stat
setting, attribute or ``.gitmodules`` setting takes part in the verdict; the
index and git's ignore rules are asked only which files are *not* in the
commit (staged or untracked; ignored files do not count).

Blob ids come from ``git_blobs`` (the stat cache keeps them: an unchanged
repository re-checks with one stat per file).  A Git LFS pointer blob matches
a work-tree file whose sha256 and size are the pointer's (the file git-lfs
would check out).

For the in-process guard: :func:`tracked_blobs` (a commit's path -> (mode,
blob id)) and :func:`worktree_blob_id` (a file's id as it is now) answer "is
this file's work-tree content the pinned commit's blob?".
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from ftmanifest.hashing.digests import FileDigest
from ftmanifest.hashing.files import hash_files
from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe._git_env import GitFailed, git_context, own_repository, run_git
from ftmanifest.probe.git_blobs import (
    EXECUTABLE,
    REGULAR,
    SYMLINK,
    blob_id,
    format_of,
    observe_blobs,
    worktree_blob_id,
)
from ftmanifest.statcache import StatCache
from ftmanifest.untrusted import kind_of

__all__ = [
    "EXECUTABLE", "GITLINK", "REGULAR", "SYMLINK", "ContentChange", "ContentResult", "GitFailed",
    "TrackedBlob", "blob_id", "compare_worktree", "format_of", "read_blobs", "shown",
    "tracked_blobs", "worktree_blob_id",
]  # fmt: skip
GITLINK = "160000"
MAX_SUBMODULE_DEPTH = 8
MAX_FLAGGED = 50  # changed files whose index flags and filter are looked up for the fix
_LFS = re.compile(rb"\Aversion https://git-lfs\.github\.com/spec/v1\n(?:.*\n)*?"
                  rb"oid sha256:([0-9a-f]{64})\nsize ([0-9]+)\n", re.S)  # fmt: skip


class TrackedBlob(NamedTuple):
    """One entry of a commit's tree: its mode (``100644``...) and object id."""

    mode: str
    blob: str


ChangeKind = Literal[
    "modified", "mode", "missing", "type", "unreadable", "submodule", "staged", "untracked"
]


@dataclass(frozen=True)
class ContentChange:
    """A path whose work-tree content is not the commit's."""

    path: str
    """Relative to the repository root, '/'-separated, decoded as ``os.fsdecode`` does
    (rows show it through :func:`shown`)."""
    kind: ChangeKind
    expected: TrackedBlob | None
    """The commit's entry; None for a file the commit does not have."""
    observed: str
    """``blob <id> (mode 100644)``, ``commit <id>`` for a submodule, ``absent``, ``a FIFO``..."""
    flags: tuple[str, ...] = ()
    """What made git look away, for the fix: ``skip-worktree``, ``assume-unchanged``,
    ``filter=<name>``.  Never part of the verdict."""


@dataclass(frozen=True)
class ContentResult:
    changes: tuple[ContentChange, ...] = ()
    error: str | None = None
    """Why the work tree could not be compared (git failed): nothing is known."""


def shown(path: str) -> str:
    """A path as rows show it: bytes that are not UTF-8 as U+FFFD."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def tracked_blobs(root: str | os.PathLike[str], commit: str, *, ctx: ProbeContext | None = None
                  ) -> dict[str, TrackedBlob]:  # fmt: skip
    """Every entry of ``commit``'s tree: repository path -> (mode, object id).

    Paths are '/'-separated, decoded as the file system decodes names
    (``os.fsdecode``), so ``os.path.join(root, path)`` opens the file.  Raises
    ``GitFailed`` when git cannot list the commit.
    """
    git = _context(ctx)
    out = run_git(git, ["ls-tree", "-r", "-z", "--full-tree", commit], os.fspath(root))
    tree: dict[str, TrackedBlob] = {}
    for record in out.split(b"\0"):
        meta, tab, name = record.partition(b"\t")
        if tab:
            mode, _kind, oid = meta.decode("ascii").split(" ")
            tree[os.fsdecode(name)] = TrackedBlob(mode, oid)
    return tree


def compare_worktree(
    root: str | os.PathLike[str],
    commit: str,
    *,
    ctx: ProbeContext | None = None,
    use_cache: bool = True,
    skip: Callable[[str], bool] | None = None,
) -> ContentResult:
    """Every difference between the work tree at ``root`` and ``commit``: tracked
    files by content and mode, submodules by their HEAD and content, and files
    the commit does not have (staged or untracked, git's ignore rules apply).

    ``skip``: repository paths whose tracked files are not read (a manifest's
    data and weights, judged by their own digests: read once, not twice); they
    are neither a change nor a match."""
    git = _context(ctx)
    cache = StatCache() if use_cache else None
    try:
        changes = _compare(os.fspath(root), commit, git, cache, "", 0, skip)
    except GitFailed as exc:
        return ContentResult(error=str(exc))
    finally:
        if cache is not None:
            cache.close()
    return ContentResult(tuple(changes))


def _context(ctx: ProbeContext | None) -> ProbeContext:
    return git_context(ctx if ctx is not None else ProbeContext())


def _compare(
    root: str, commit: str, git: ProbeContext, cache: StatCache | None, prefix: str, depth: int,
    skip: Callable[[str], bool] | None = None,
) -> list[ContentChange]:  # fmt: skip
    tree = tracked_blobs(root, commit, ctx=git)
    fmt = format_of(commit)
    files = {p: t for p, t in tree.items() if t.mode != GITLINK}
    if skip is not None:
        files = {p: t for p, t in files.items() if not skip(prefix + p)}
    seen = observe_blobs(root, list(files), fmt, cache)
    changes = [c for p, t in files.items() if (c := _judge(p, t, seen[p]))]
    changes = _without_lfs_objects(root, changes, git, cache)
    changes += _not_in_commit(root, tree, git)
    changes = [
        ContentChange(prefix + c.path, c.kind, c.expected, c.observed, c.flags)
        for c in _with_flags(root, changes, git)
    ]
    for path, entry in tree.items():
        if entry.mode == GITLINK:
            changes += _submodule(root, path, entry, git, cache, prefix, depth, skip)
    return sorted(changes, key=lambda c: c.path.encode("utf-8", "surrogateescape"))


def _judge(path: str, want: TrackedBlob, seen: tuple[str, str | None]) -> ContentChange | None:
    mode, oid = seen
    if oid is None:
        kind: ChangeKind = "missing" if mode == "absent" else "type"
        if mode.startswith("unreadable"):
            kind = "unreadable"
        return ContentChange(path, kind, want, mode)
    if (mode, oid) == (want.mode, want.blob):
        return None
    observed = f"blob {oid} (mode {mode})"
    if oid != want.blob:
        return ContentChange(path, "modified", want, observed)
    if SYMLINK in (mode, want.mode):
        return ContentChange(path, "type", want, observed)  # a link whose text is a file's bytes
    return ContentChange(path, "mode", want, observed)


def _without_lfs_objects(
    root: str, changes: list[ContentChange], git: ProbeContext, cache: StatCache | None
) -> list[ContentChange]:
    """``changes`` less each modified file whose pinned blob is a Git LFS pointer
    that the work tree's bytes satisfy (their sha256 and size are the pointer's)."""
    pinned = [c.expected.blob for c in changes if c.kind == "modified" and c.expected]
    if not pinned:
        return changes
    blobs = read_blobs(root, pinned, git, limit=1024)
    out = []
    for c in changes:
        pointer = _LFS.match(blobs.get(c.expected.blob, b"")) if c.expected else None
        if pointer and c.kind == "modified":
            want = (f"sha256:{pointer[1].decode()}", int(pointer[2]))
            if _sha256_of(os.path.join(root, c.path), cache) == want:
                continue
        out.append(c)
    return out


def _sha256_of(path: str, cache: StatCache | None) -> tuple[str, int] | None:
    found = hash_files([path], use_cache=cache is not None, cache=cache, workers=1)
    result = next(iter(found.values()))
    return (result.digest, result.size) if isinstance(result, FileDigest) else None


def read_blobs(
    root: str | os.PathLike[str], ids: Iterable[str], ctx: ProbeContext, *, limit: int
) -> dict[str, bytes]:
    """The content of each blob of ``ids`` no larger than ``limit`` bytes (raw, no
    filter), read with two ``git cat-file`` calls whatever their number."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    cwd = os.fspath(root)
    sizes = run_git(ctx, ["cat-file", "--batch-check"], cwd, "\n".join(wanted).encode() + b"\n")
    small = []
    for line in sizes.decode("ascii", "replace").splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[1] == "blob" and int(parts[2]) <= limit:
            small.append(parts[0])
    if not small:
        return {}
    out = run_git(ctx, ["cat-file", "--batch"], cwd, "\n".join(small).encode() + b"\n")
    blobs: dict[str, bytes] = {}
    at = 0
    while at < len(out):
        header_end = out.index(b"\n", at)
        oid, _kind, size = out[at:header_end].decode("ascii").split(" ")
        start = header_end + 1
        blobs[oid] = out[start : start + int(size)]
        at = start + int(size) + 1
    return blobs


def _submodule(
    root: str, path: str, entry: TrackedBlob, git: ProbeContext, cache: StatCache | None,
    prefix: str, depth: int, skip: Callable[[str], bool] | None,
) -> list[ContentChange]:  # fmt: skip
    """A gitlink: the submodule's checked-out HEAD is the commit recorded, and its
    own work tree that commit's content (whatever ``.gitmodules`` or the config say)."""
    shown_path, full = prefix + path, os.path.join(root, path)
    try:
        st = os.lstat(full)
    except OSError:
        return [ContentChange(shown_path, "missing", entry, "absent")]
    if not stat.S_ISDIR(st.st_mode):
        return [ContentChange(shown_path, "type", entry, kind_of(st.st_mode))]
    if not os.listdir(full):
        return [ContentChange(shown_path, "missing", entry, "not checked out")]
    sub = own_repository(git)
    try:
        said = run_git(sub, ["rev-parse", "--show-toplevel", "HEAD"], full).decode()
        top, head = said.rstrip("\n").rsplit("\n", 1)
    except (GitFailed, ValueError):
        top, head = "", ""
    if os.path.realpath(top or "/") != os.path.realpath(full):
        return [ContentChange(shown_path, "type", entry, "a folder that is not a checkout")]
    if head != entry.blob:
        return [ContentChange(shown_path, "submodule", entry, f"commit {head}")]
    if depth >= MAX_SUBMODULE_DEPTH:
        return [ContentChange(shown_path, "type", entry, "submodules nested too deep to check")]
    return _compare(full, head, sub, cache, shown_path + "/", depth + 1, skip)


def _not_in_commit(root: str, tree: Mapping[str, TrackedBlob], git: ProbeContext
                   ) -> list[ContentChange]:  # fmt: skip
    """Files the commit does not have: in the index only (staged, whatever its flags)
    or untracked (a wholly untracked folder as ``folder/``); ignored files do not count."""
    out: list[ContentChange] = []
    index = run_git(git, ["ls-files", "-z", "--cached"], root)
    for name in {os.fsdecode(n) for n in index.split(b"\0") if n}:
        if name not in tree and os.path.lexists(os.path.join(root, name)):
            out.append(ContentChange(name, "staged", None, "staged, not committed"))
    others = run_git(
        git,
        ["ls-files", "-z", "--others", "--exclude-standard", "--directory", "--no-empty-directory"],
        root,
    )
    for name in (os.fsdecode(n) for n in others.split(b"\0") if n):
        if name not in tree:
            out.append(ContentChange(name, "untracked", None, "untracked"))
    return out


def _with_flags(root: str, changes: list[ContentChange], git: ProbeContext) -> list[ContentChange]:
    """``changes`` with the index flags and the clean filter git applies to each of
    their first ``MAX_FLAGGED`` files (for the fix; the verdict is already made)."""
    named = [c.path for c in changes if c.kind != "untracked"][:MAX_FLAGGED]
    if not named:
        return changes
    flags: dict[str, list[str]] = {}
    pathspecs = "\0".join(named).encode("utf-8", "surrogateescape") + b"\0"
    try:
        tags = run_git(git, ["--literal-pathspecs", "ls-files", "-v", "-z", "--", *named], root)
        attrs = run_git(git, ["check-attr", "-z", "--stdin", "filter"], root, pathspecs)
    except GitFailed:
        return changes  # the fix is then worded without them
    for entry in (os.fsdecode(e) for e in tags.split(b"\0") if len(e) > 2):
        tag, name = entry[0], entry[2:]
        if tag == "S" or tag == "s":
            flags.setdefault(name, []).append("skip-worktree")
        if tag.islower():
            flags.setdefault(name, []).append("assume-unchanged")
    fields = [os.fsdecode(f) for f in attrs.split(b"\0")]
    for name, _attr, value in zip(fields[0::3], fields[1::3], fields[2::3], strict=False):
        if value not in ("unspecified", "unset", "set", ""):
            flags.setdefault(name, []).append(f"filter={value}")
    return [
        ContentChange(c.path, c.kind, c.expected, c.observed, tuple(flags.get(c.path, ())))
        for c in changes
    ]
