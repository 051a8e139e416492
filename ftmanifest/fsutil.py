"""Careful file writing: never leave a half-written file.

Layer: file access (the one atomic writer, shared by every command that writes:
``init``, ``lock``, ``schema --write``, ``scan --write-baseline`` and
``--redact-to``).  A write that the system refuses (read-only or immutable
file, missing folder, a ``/proc`` path, a full disk) is a ``WriteError``
naming the path and a fix: exit 2, never a crash.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from ftmanifest.errors import EXIT_INPUT, FtManifestError, InputError
from ftmanifest.location import Loc


class WriteError(FtManifestError, OSError):
    """A file could not be written where the user asked: unusable output (exit 2)."""

    reason = "cannot-write"
    exit_code = EXIT_INPUT


def _hint(exc: OSError, target: Path) -> str:
    folder = target.parent if str(target.parent) else Path(".")
    existing = next((p for p in (folder, *folder.parents) if p.is_dir()), None)
    if (
        exc.errno == errno.ENOENT
        and existing is not None
        and existing.resolve().parts[1:2]
        in (
            ("proc",),
            ("sys",),
        )
    ):
        return f"{existing} is a kernel file system that takes no new files; choose another path"
    if exc.errno == errno.ENOENT and folder.is_dir():
        return f"{folder} accepts no new files; choose another path"
    if exc.errno == errno.ENOENT:
        return f"create the folder first (mkdir -p {folder}) or choose another path"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            f"make {folder} writable (and {target.name} not read-only or immutable: "
            "chattr -i), or choose another path"
        )
    if exc.errno == errno.EISDIR:
        return "give a file name, not a folder"
    if exc.errno == errno.ENOSPC:
        return "free some disk space, or choose another path"
    return "choose a path in a writable folder"


def write_error(exc: OSError, target: str | Path, what: str = "cannot write") -> WriteError:
    """The ``WriteError`` for ``exc`` raised while writing ``target``."""
    path = Path(target)
    err = WriteError(
        f"{what}: {exc.strerror or exc}",
        path=str(path),
        observed=f"{type(exc).__name__} (errno {exc.errno})" if exc.errno else type(exc).__name__,
        hint=_hint(exc, path),
    )
    err.errno = exc.errno
    err.strerror = exc.strerror
    return err


def atomic_write_bytes(
    path: str | Path,
    data: bytes,
    *,
    mode: int = 0o644,
    exclusive: bool = False,
    make_parents: bool = False,
) -> None:
    """Write to a temp file in the same folder, fsync, then rename over ``path``.

    ``exclusive`` refuses to replace an existing file (FileExistsError);
    ``make_parents`` creates missing folders first.  Any other failure of the
    system is a ``WriteError`` (exit 2) naming ``path``.
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if exclusive and target.exists():
        raise FileExistsError(str(target))
    if target.is_dir():
        raise write_error(IsADirectoryError(errno.EISDIR, "is a directory"), target)
    try:
        if make_parents:
            folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise write_error(exc, target) from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive:
            os.link(tmp, target)  # fails if it appeared meanwhile
            os.unlink(tmp)
        else:
            os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, (FileExistsError, FtManifestError)):
            raise write_error(exc, target) from None
        raise
    fsync_dir(folder)


def atomic_write_text(path: str | Path, text: str, **kw: object) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), **kw)  # type: ignore[arg-type]


def fsync_dir(folder: Path) -> None:
    """Persist a folder's entries (a rename into it); best effort."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --- pinned paths stay inside the manifest's repository -----------------------


class PathOutsideError(InputError):
    """A path in the manifest leaves the manifest's repository (its folder when
    the manifest is in no git repository)."""

    reason = "path-outside-repository"


class PathUnresolvableError(PathOutsideError):
    """A path whose target cannot be found (a symlink loop): it cannot be shown to
    stay inside the manifest's repository, so it is refused like one that leaves it."""

    reason = "path-unresolvable"


def enclosing_repository(folder: Path) -> Path | None:
    """The nearest folder at or above ``folder`` (symlinks resolved) holding a git
    work tree's ``.git`` (a folder with ``HEAD``, or a ``gitdir:`` file) owned by
    this user, or None.

    This is the bound of a manifest's relative paths, so it is read from the
    file system alone, unlike ``probe.git.repository_root``: no environment
    (``GIT_DIR``, ``GIT_WORK_TREE``) can widen it and no subprocess runs per
    pinned path.  Like git's ``safe.directory`` check, a ``.git`` another user
    owns (one planted in ``/tmp``) is not taken; root takes any.
    """
    euid = os.geteuid() if hasattr(os, "geteuid") else None
    real = folder.resolve()
    for top in (real, *real.parents):
        dot_git = top / ".git"
        try:
            st = dot_git.lstat()
            if euid not in (None, 0, st.st_uid):
                continue
            if dot_git.is_dir():
                found = (dot_git / "HEAD").is_file()
            else:
                with open(dot_git, "rb") as fh:
                    found = fh.read(7) == b"gitdir:"
        except OSError:
            continue
        if found:
            return top
    return None


def path_bound(base: Path) -> Path:
    """The folder that the paths of a manifest in ``base`` may not leave, symlinks
    resolved: the git repository holding ``base``, else ``base`` itself."""
    folder = base.resolve()
    return enclosing_repository(folder) or folder


def resolve_inside(base: Path, rel: str, loc: Loc, allow_outside: bool) -> Path:
    """``base / rel``, refused if it (or a symlink in it) leads outside the git
    repository holding ``base`` (the manifest's folder), or outside ``base``
    itself when no repository holds it.  An absolute path is always refused: a
    committed manifest carries it to every clone."""
    candidate = Path(rel)
    path = candidate if candidate.is_absolute() else base / candidate
    if allow_outside:
        return path
    try:
        folder = base.resolve()
        repo = enclosing_repository(folder)
        target = path.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop: Python raises RuntimeError
        raise PathUnresolvableError(
            "path cannot be resolved (a symlink loop?)",
            path=rel,
            loc=loc,
            expected=f"a path inside {base}",
            observed=str(exc),
            hint="replace the link with the file it should point to",
        ) from None
    bound = repo or folder
    if candidate.is_absolute() or (target != bound and bound not in target.parents):
        raise PathOutsideError(
            f"path leaves the manifest's {'repository' if repo else 'folder'}",
            path=rel,
            loc=loc,
            expected=f"a path relative to the manifest's folder, inside {bound}",
            observed=str(target),
            hint=(
                "move the file into the manifest's repository, or pass --allow-outside"
                if repo
                else "move the file under the manifest's folder (or make a git repository "
                "that holds both), or pass --allow-outside"
            ),
        )
    return path


def locate(base: Path, rel: str, loc: Loc, allow_outside: bool) -> tuple[Path | None, str | None]:
    """(path, None) for a pinned path that is usable here, else (None, why not).

    Why not: it leaves the manifest's repository, or nothing is there (a broken
    link included).  Every reader of pinned paths goes through here, so they
    all refuse the same things the same way.
    """
    try:
        path = resolve_inside(base, rel, loc, allow_outside)
    except PathOutsideError as exc:
        return None, f"{exc.message}: {exc.observed}"
    if not path.exists():
        return None, "not found"
    return path, None
