"""Restore's destination: where it may go, what is left beside it, how it is replaced.

Layer: edge (the file system, through DEST's parent's descriptor).  A DEST
that holds the backup's folder or lies inside it is refused before anything
is made (``--force`` would delete the backup being restored); the path to
DEST must still lead to the folder held open before the staging folder is
renamed; staging folders a killed restore left are removed on the next
restore of that DEST: only ours (named by ``staging_pattern``, owned by
this user, not locked by a restore still running).
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import stat
from pathlib import Path

from ftmanifest.backup.dirfd import open_dir, remove_tree
from ftmanifest.backup.errors import DestinationMovedError, DestinationOverlapError

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
        from ftmanifest.backup.errors import BackupInputError

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
            field="--to",
            expected=f"a folder outside {folder}, and not one that holds it",
            observed=f"DEST is {real}; the backup is in {folder}",
            hint="pick a --to folder beside the backups folder, not above or inside it",
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
            field="--to",
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
