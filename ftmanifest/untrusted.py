"""Reading a file that someone else may have written: regular, and capped.

Layer: file access.  An envelope, a trust file, a key, an adapter's binding, a
backup's metadata or a results file comes from whoever could write the folder
it is in, so it is read only if it is a regular file (a FIFO would block,
``/dev/zero`` never ends) and no larger than a cap; symlinks are followed, the
target must be regular.  Each refusal has its own reason code
(``not-regular-file``, ``file-too-large``).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ftmanifest import held
from ftmanifest.errors import FileTooLargeError, NotRegularFileError

MiB = 1 << 20
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",  # seen only by lstat (kind_of)
}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def kind_of(mode: int) -> str:
    """What a file that is not regular is, in words: "a folder", "a FIFO (named pipe)"..."""
    return _kind(mode)


def read_untrusted(path: Path, *, limit: int, what: str, hint: str) -> bytes:
    """The bytes of regular file ``path`` (at most ``limit``).

    Opens with O_NONBLOCK so a FIFO cannot block the open, then refuses by
    ``fstat`` whatever is not a regular file.  ``FileNotFoundError`` passes
    through for the caller to word.  Inside ``verify`` a file it hashed is
    read from the descriptor hashing kept (``ftmanifest.held``).
    """
    kept = held.kept(path)
    fd = kept if kept is not None else _open(path, what, hint)
    try:
        mode = os.fstat(fd).st_mode if fd >= 0 else stat.S_IFDIR
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(
                f"the {what} is {_kind(mode)}, not a regular file",
                path=str(path),
                expected="a regular file",
                observed=_kind(mode),
                hint=hint,
            )
        size = os.fstat(fd).st_size
        chunks: list[bytes] = []
        total = 0
        while size <= limit and total <= limit:
            chunk = os.pread(
                fd, min(limit + 1 - total, MiB), total
            )  # a kept fd's offset is not ours
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if size > limit or total > limit:
            raise FileTooLargeError(
                f"the {what} is larger than {limit} bytes",
                path=str(path),
                expected=f"at most {limit} bytes",
                observed=f"{max(size, total)} bytes",
                hint=hint,
            )
        return b"".join(chunks)
    finally:
        if fd >= 0 and kept is None:
            os.close(fd)


def _open(path: Path, what: str, hint: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:  # pragma: no cover - Linux opens folders read-only
        return -1
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise FileNotFoundError(exc.errno, exc.strerror, str(path)) from None
        raise NotRegularFileError(
            f"cannot open the {what}: {exc.strerror}",
            path=str(path),
            expected="a readable regular file",
            observed=exc.strerror,
            hint=hint,
        ) from None
