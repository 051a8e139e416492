"""Restore's destination: where it may go, what is left beside it, how it is replaced.

Layer: judging rooms - edge (the file system, through DEST's parent's descriptor).  A
DEST that holds the backup's folder or lies inside it is refused before anything is made
(``--force`` would delete the backup being restored); the path to DEST must still lead
to the folder held open before the staging folder is renamed; staging folders a killed
restore left are removed on the next restore of that DEST: only ours (named by
``staging_pattern``, owned by this user, not locked by a restore still running).  While
a staging folder exists a record of it sits in the user's cache (``restores/``), so that
``backup check`` of the backups folder can name one a killed restore left.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from ftmanifest.backup.dirfd import open_dir, remove_tree
from ftmanifest.backup.errors import (
    BackupInputError,
    DestinationMovedError,
    DestinationOverlapError,
)
from ftmanifest.statcache import cache_dir

STAGING = ".{name}.restore-"


def staging_pattern(dest_name: str) -> re.Pattern[str]:
    """The names of staging folders of DEST ``dest_name`` (8 random characters,
    as ``tempfile.mkdtemp`` and ``new_folder`` make them)."""
    return re.compile(re.escape(STAGING.format(name=dest_name)) + "[a-z0-9_]{8}")


def exists(parent: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def check_space(parent: int, dest: Path, needed: int) -> None:
    free = shutil.disk_usage(parent).free  # statvfs of the descriptor
    if free < needed:
        raise BackupInputError(
            "not enough free space to restore the backup",
            path=str(dest.parent),
            expected=f"at least {needed} bytes free (the backup's files)",
            observed=f"{free} bytes free",
            hint="free space or restore to another file system; nothing was written",
        )


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def refuse_overlap(dest: Path, archive: Path) -> None:
    """DEST must neither hold the backup's folder nor lie inside it: replacing
    DEST (``--force``) would delete the backup being restored.  DEST itself
    is not resolved: a symlink there is replaced, not followed."""
    real = os.path.join(os.path.realpath(dest.parent), dest.name)
    folder = os.path.realpath(archive.parent)
    if _inside(real, folder) or _inside(folder, real):
        raise DestinationOverlapError(
            "the destination holds the backups folder or lies inside it; restoring "
            "there would replace or mix with the backup being restored",
            path=str(dest),
            field="--out",
            expected=f"a folder outside {folder}, and not one that holds it",
            observed=f"DEST is {real}; the backup is in {folder}",
            hint="pick a --out folder beside the backups folder, not above or inside it",
        )


def refuse_moved(parent: int, dest: Path) -> None:
    """The path to DEST's parent must still lead to the folder held open."""
    held = os.fstat(parent)
    try:
        now = os.stat(dest.parent)
        seen = f"device {now.st_dev}, inode {now.st_ino}"
    except OSError as exc:
        now, seen = None, f"it cannot be reached: {exc.strerror}"
    if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
        raise DestinationMovedError(
            "the folder DEST is in was moved or replaced while restoring; "
            "nothing was restored and nothing was written outside the folder first opened",
            path=str(dest),
            field="--out",
            expected=f"{dest.parent} to stay the folder restore opened "
            f"(device {held.st_dev}, inode {held.st_ino})",
            observed=seen,
            hint="find who can rename folders above DEST, then restore again into a "
            "folder only you can change",
        )


def replace(parent: int, staging: str, name: str) -> None:
    """Move the old DEST aside, put the staging folder in its place, delete the old."""
    aside = new_folder(parent, f".{name}.old-")
    aside_fd = open_dir(aside, parent)
    try:
        os.rename(name, "old", src_dir_fd=parent, dst_dir_fd=aside_fd)
    finally:
        os.close(aside_fd)
    os.rename(staging, name, src_dir_fd=parent, dst_dir_fd=parent)
    remove_quietly(parent, aside)


def new_folder(parent: int, prefix: str) -> str:
    """A new folder of ``parent`` (mode 0700) named ``prefix`` and 8 random
    characters, as ``tempfile.mkdtemp`` names them."""
    while True:
        name = prefix + secrets.token_hex(4)
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            continue
        return name


def remove_quietly(parent: int, name: str) -> None:
    try:
        remove_tree(parent, name)
    except OSError:
        pass


def remove_stale_staging(parent: int, dest_name: str) -> None:
    """Staging folders of this DEST that a killed restore left, with the
    decrypted files in them: only folders named as we name them, owned by this
    user and not locked by a restore still running."""
    pattern = staging_pattern(dest_name)
    for name in os.listdir(parent):
        if not pattern.fullmatch(name):
            continue
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            fd = open_dir(name, parent)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a restore is writing into it now
        finally:
            os.close(fd)
        remove_quietly(parent, name)


def _records() -> Path:
    return cache_dir() / "restores"


def note_staging(staging: str, backups: Path) -> Path | None:
    """Record that ``staging`` (an absolute path) holds decrypted files of a
    backup in ``backups``; best effort (a restore never fails for it).
    Records whose folder is gone are dropped on the way."""
    folder = _records()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for old, where, _ in _read_records(folder):
            if not os.path.lexists(where):
                old.unlink(missing_ok=True)
        record = folder / f"{secrets.token_hex(8)}.json"
        doc = {"staging": staging, "backups": os.path.realpath(backups)}
        with open(record, "x", encoding="utf-8") as fh:
            json.dump(doc, fh)
    except OSError:
        return None
    return record


def forget_staging(record: Path | None) -> None:
    if record is not None:
        try:
            record.unlink()
        except OSError:
            pass


def left_staging(backups: Path) -> list[tuple[str, str]]:
    """Staging folders of restores from ``backups`` that are still there and
    that no running restore holds (what a restore killed midway left), each
    with the DEST it was for."""
    real = os.path.realpath(backups)
    out: list[tuple[str, str]] = []
    for _, where, of in _read_records(_records()):
        if of == real and _stale(where):
            parent, name = os.path.split(where)
            out.append((where, os.path.join(parent, name[1 : name.rindex(".restore-")])))
    return sorted(out)


def _read_records(folder: Path) -> Iterator[tuple[Path, str, str]]:
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError:
        return
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            yield path, str(doc["staging"]), str(doc["backups"])
        except (OSError, ValueError, KeyError, TypeError):
            continue


def _stale(where: str) -> bool:
    """Our staging folder, not locked by a restore writing into it now."""
    if not re.fullmatch(r"\..+\.restore-[a-z0-9_]{8}", os.path.basename(where)):
        return False
    try:
        st = os.lstat(where)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return False
        fd = open_dir(where)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True
