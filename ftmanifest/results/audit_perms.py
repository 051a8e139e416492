"""Permissions of a run's artifacts against ``security.max_modes``, and tightening them.

Layer: judging rooms - edge (reads and, with ``fix=True``, changes file modes).
``max_modes`` gives the most permissive mode of a *file* per artifact class (data,
checkpoints, logs, keys); a folder of that class may also have the search (x) bit
wherever the file mode has the read bit, and its owner always has rwx (a folder its
owner cannot enter cannot be cleaned up).  Any bit beyond that is a problem:
group/world-readable or writable files and folders.

A symlink is never changed itself.  One that stays inside the folder being
judged is skipped (its target is judged where it lives); one that leads
outside is judged where it points (``keys`` linked to a folder of
world-readable keys used to pass), and never changed there: with ``fix`` it
is an unfixed row naming the link.  ``tighten`` only
clears bits (``mode & allowed``), never loosens, and changes a file through a
descriptor opened with ``O_NOFOLLOW`` after checking that it is still the
entry that was judged, so a link swapped in between cannot redirect it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.location import Loc

CLASSES = ("data", "checkpoints", "logs", "keys")


def file_mask(mode: str) -> int:
    """The allowed bits of a file: ``"0640"`` -> ``0o640``."""
    return int(mode, 8) & 0o777


def folder_mask(mode: str) -> int:
    """The allowed bits of a folder: the file's, x where r is, owner rwx (0640 -> 0750)."""
    bits = file_mask(mode)
    return bits | 0o700 | ((bits & 0o044) >> 2)


@dataclass(frozen=True)
class PermProblem:
    """One file or folder with more permission bits than its class allows."""

    path: Path
    klass: str  # data, checkpoints, logs or keys
    is_dir: bool
    mode: int  # the permission bits seen (lstat, & 0o777)
    allowed: int
    dev_ino: tuple[int, int]
    via: Path | None = None  # the symlink in the run that leads out to it
    shared: str | None = None  # the shared cache it lies in (never changed), how to name it

    @property
    def tightened(self) -> int:
        return self.mode & self.allowed


@dataclass(frozen=True)
class PermChange:
    """A mode ``tighten`` changed: ``path`` from ``old`` to ``new``."""

    path: Path
    old: int
    new: int

    def to_dict(self) -> dict[str, str]:
        return {"path": str(self.path), "old": f"{self.old:04o}", "new": f"{self.new:04o}"}


Entry = tuple[Path, os.stat_result, Path | None]  # path, lstat, the link that led out to it


def _entries(root: Path) -> Iterator[Entry]:
    """``root`` and everything under it (lstat), each once.

    A symlink whose target lies inside ``root`` is skipped: the target is judged
    where it lives.  One that leads outside (``RUN_DIR/logs`` -> ``/scratch/logs``,
    a key file linked from elsewhere) is judged where it points: a run's keys
    and logs are as readable as the files the links reach.  The third item
    names that link (None inside the folder).
    """
    boundary = os.path.realpath(root)
    seen: set[tuple[int, int]] = set()
    yield from _walk(root, boundary, seen, None, top=True)


def _walk(
    path: Path,
    boundary: str,
    seen: set[tuple[int, int]],
    via: Path | None,
    *,
    top: bool = False,
) -> Iterator[Entry]:
    try:
        st = path.lstat()
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        target = os.path.realpath(path)
        if not top and _inside(target, boundary):
            return  # judged where it lives
        path, via = Path(target), path
        try:
            st = path.lstat()  # realpath left no link to follow
        except OSError:
            return  # a dangling link reaches nothing
    if (st.st_dev, st.st_ino) in seen:
        return
    seen.add((st.st_dev, st.st_ino))
    yield path, st, via
    if not stat.S_ISDIR(st.st_mode):
        return
    try:
        with os.scandir(path) as it:
            children = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for entry in children:
        yield from _walk(Path(entry.path), boundary, seen, via)


def _inside(target: str, boundary: str) -> bool:
    return target == boundary or target.startswith(boundary.rstrip(os.sep) + os.sep)


def check_tree(root: Path, klass: str, mode: str, shared: str | None = None) -> list[PermProblem]:
    """Every regular file and folder at or under ``root`` that is looser than ``mode``."""
    out: list[PermProblem] = []
    for path, st, via in _entries(root):
        is_dir = stat.S_ISDIR(st.st_mode)
        if not (is_dir or stat.S_ISREG(st.st_mode)):
            continue  # symlinks, FIFOs, sockets, devices: not judged, never changed
        allowed = folder_mask(mode) if is_dir else file_mask(mode)
        bits = stat.S_IMODE(st.st_mode) & 0o777
        if bits & ~allowed:
            ident = (st.st_dev, st.st_ino)
            out.append(PermProblem(path, klass, is_dir, bits, allowed, ident, via, shared))
    return out


def judge(
    roots: Iterable[tuple[str, Path]],
    modes: Any,
    *,
    fix: bool = False,
    shared: dict[Path, str] | None = None,
) -> tuple[list[PermProblem], list[PermProblem], list[PermChange]]:
    """(loose, unfixed, changes) over ``(class, root)`` pairs; ``modes`` is a ``FileModes``.

    Without ``fix`` every problem is loose; with it, each is tightened
    (``tighten``) or, when that is not safely possible, unfixed.  A path
    under two roots is judged once, by the first.  ``shared`` names the
    roots that are a cache other runs and users share (the Hugging Face hub
    cache holding a public base): their problems are reported, never
    changed, and say how to hold the files privately instead.
    """
    loose: list[PermProblem] = []
    unfixed: list[PermProblem] = []
    changes: list[PermChange] = []
    judged: set[Path] = set()
    for klass, root in roots:
        what = (shared or {}).get(root)
        for problem in check_tree(root, klass, getattr(modes, klass), what):
            if problem.path in judged:
                continue
            judged.add(problem.path)
            if not fix:
                loose.append(problem)
            elif problem.via is not None or problem.shared is not None:
                unfixed.append(problem)  # outside the run: audit changes nothing there
            elif (change := tighten(problem)) is not None:
                changes.append(change)
            else:
                unfixed.append(problem)
    return loose, unfixed, changes


def tighten(problem: PermProblem) -> PermChange | None:
    """Clear the bits ``problem`` has beyond its class; None when the entry changed meanwhile.

    Opened with ``O_NOFOLLOW`` (a symlink swapped in fails to open) and checked
    against the device and inode that were judged before ``fchmod``.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if problem.is_dir:
        flags |= os.O_DIRECTORY
    try:
        fd = os.open(problem.path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != problem.dev_ino:
            return None
        old = stat.S_IMODE(st.st_mode)
        new = old & ~(0o777 & ~problem.allowed)  # only clears rwx bits, never sets one
        if new == old:
            return None
        os.fchmod(fd, new)
        return PermChange(problem.path, old, new)
    finally:
        os.close(fd)


def shared_hint(what: str) -> str:
    """How to fix a loose mode in a shared cache for this user only."""
    return (
        f"audit never changes the {what}: other runs and users read it. To hold the "
        "base for this user only, download it into a cache of your own "
        "(umask 077; HF_HUB_CACHE=~/.cache/huggingface/private-hub hf download REPO "
        "--revision COMMIT) and point HF_HUB_CACHE there for the run; or, if the cache "
        "is yours alone, chmod -R go-rwx it"
    )


def problem_finding(problem: PermProblem, hint: str) -> Finding:
    """The audit row for one loose mode, located at ``security.max_modes.<class>``."""
    loc: Loc = ("security", "max_modes", problem.klass)
    what = "folder" if problem.is_dir else "file"
    extra_bits = problem.mode & ~problem.allowed
    loose = [
        f"{who}-{how}"
        for who, shift in (("group", 3), ("world", 0))
        for how, bit in (("readable", 0o4), ("writable", 0o2), ("searchable", 0o1))
        if extra_bits & (bit << shift)
    ]
    said = ", ".join(loose) or "too permissive"
    through = f", reached through the link {problem.via}" if problem.via is not None else ""
    if problem.shared is not None:
        through += f", in the shared {problem.shared}"
    return Finding.at(
        loc,
        kind="audit",
        rule="audit.permissions",
        message=f"{problem.klass} {what} is {said} (beyond security.max_modes){through}",
        path=str(problem.path),
        expected=f"at most {problem.allowed:04o}",
        observed=f"{problem.mode:04o}",
        hint=hint,
        extra={"class": problem.klass, "folder": problem.is_dir},
    )


def unfixed_finding(problem: PermProblem) -> Finding:
    """The row for a loose mode ``fix`` could not change (unreadable, swapped, or outside)."""
    if problem.shared is not None:
        return problem_finding(problem, shared_hint(problem.shared))._replace(
            rule="audit.permissions-unfixed"
        )
    if problem.via is not None:
        hint = f"{problem.via} links to it outside the run: chmod it there or copy it in"
        return problem_finding(problem, hint)._replace(rule="audit.permissions-unfixed")
    return problem_finding(
        problem, "chmod it by hand (audit could not open it without following a link)"
    )._replace(rule="audit.permissions-unfixed")
