"""What hashing gives back: a file's digest, a tree's, or an error naming the path.

Layer: file access (pure: no file is read here).  ``FileDigest`` and
``TreeResult`` are the results, ``tree_digest`` the tree digest over file
digests (see ``ftmanifest.hashing``), and the three errors with the helpers
that build each from what the OS said.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from ftmanifest.errors import FtManifestError, InputError, InputNotFoundError

ALGORITHM = "sha256"
_DIGEST_RE = re.compile(r"[a-z0-9][a-z0-9-]*:[0-9a-f]+")

StrPath: TypeAlias = "str | os.PathLike[str]"
CountSpec: TypeAlias = "str | Mapping[Path, str | None] | None"
_KINDS = (
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISDIR, "directory"),
)


class FileChangedError(InputError):
    """A file changed while it was being hashed."""

    reason = "file-changed-while-read"


class UnreadableFileError(InputError):
    """A file exists but cannot be read (permission, I/O error, not a file)."""

    reason = "unreadable-file"


class SymlinkEscapeError(InputError):
    """A symlink inside a hashed tree resolves outside the allowed folder."""

    reason = "symlink-escape"


@dataclass(frozen=True)
class FileDigest:
    digest: str  # "sha256:<hex>"
    size: int
    records: int | None = None  # with count=: records in the format asked for, else None


@dataclass(frozen=True)
class TreeResult:
    files: Mapping[str, FileDigest]  # '/'-separated relative path -> digest, sorted
    digest: str  # tree_digest over files
    records: int | None = None  # with count=: the sum, None when a file has no count
    size: int = 0  # bytes in all files


def _os_error(path: Path, exc: OSError) -> FtManifestError:
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return InputNotFoundError(
            f"file not found: {path}",
            path=str(path),
            observed=reason,
            hint="restore the file or update the manifest",
        )
    return UnreadableFileError(
        f"cannot read {path}: {reason}",
        path=str(path),
        observed=reason,
        hint="check the file's permissions and the disk",
    )


def _not_regular(path: Path, mode: int) -> UnreadableFileError:
    kind = next((name for test, name in _KINDS if test(mode)), f"file type {stat.S_IFMT(mode):o}")
    return UnreadableFileError(
        f"not a regular file: {path} ({kind})",
        path=str(path),
        expected="a regular file",
        observed=kind,
        hint="point the manifest at files, not folders or devices; remove pipes and sockets",
    )


def _changed(path: Path, observed: str) -> FileChangedError:
    return FileChangedError(
        f"file changed while it was being hashed: {path}",
        path=str(path),
        observed=observed,
        hint="wait until whatever writes it has finished, then run again",
    )


def tree_digest(files: Mapping[str, str]) -> str:
    """sha256 over ``relpath NUL digest LF`` per file, sorted by UTF-8 path bytes (pure)."""
    records = []
    for rel, digest in files.items():
        _check_relpath(rel)
        if not _DIGEST_RE.fullmatch(digest):
            raise InputError(
                f"not a digest for {rel!r}: {digest!r}",
                path=rel,
                observed=digest,
                expected="<algorithm>:<lowercase hex>",
            )
        records.append((rel.encode("utf-8"), digest.encode("ascii")))
    records.sort()
    h = hashlib.sha256()
    for rel_b, digest_b in records:
        h.update(rel_b + b"\0" + digest_b + b"\n")
    return f"sha256:{h.hexdigest()}"


def _check_relpath(rel: str) -> None:
    parts = rel.split("/")
    problem = None
    if not rel or "\0" in rel or any(part in ("", ".", "..") for part in parts):
        problem = "a relative path with no empty, '.' or '..' parts and no NUL"
    else:
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            problem = "a file name that is valid UTF-8"
    if problem:
        raise InputError(
            f"bad relative path in a tree: {rel!r} (expected {problem})",
            path=rel,
            expected=problem,
            observed=repr(rel),
            hint="rename the file",
        )
