"""Reading untrusted files with limits, and ssh's StrictModes check.

Layer: signing (edge: reads files and their metadata).  An envelope, a trust
file or a key comes from whoever could write to the repository, so it is read
only if it is a regular file (a FIFO would block, ``/dev/zero`` never ends)
and no larger than a cap; symlinks are followed, the target must be regular.
Each refusal has its own reason code (``not-regular-file``, ``file-too-large``).

StrictModes (sshd's ``auth_secure_path``): a trust file is used only if it and
every folder from it up to a stop folder are owned by the user or root and not
writable by group or others.  A sticky world-writable folder such as /tmp is
refused too, as ssh does: anyone may create entries there.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ftmanifest.signing.errors import (
    FileTooLargeError,
    InsecureTrustPathError,
    NotRegularFileError,
)

MiB = 1 << 20
ENVELOPE_MAX_BYTES = MiB
TRUST_MAX_BYTES = MiB
KEY_MAX_BYTES = 64 * 1024
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_untrusted(path: Path, *, limit: int, what: str, hint: str) -> bytes:
    """The bytes of regular file ``path`` (at most ``limit``).

    Opens with O_NONBLOCK so a FIFO cannot block the open, then refuses by
    ``fstat`` whatever is not a regular file.  ``FileNotFoundError`` passes
    through for the caller to word.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:  # pragma: no cover - Linux opens folders read-only
        fd = -1
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
            chunk = os.read(fd, min(limit + 1 - total, MiB))
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
        if fd >= 0:
            os.close(fd)


def _insecure(path: Path, st: os.stat_result) -> str | None:
    """Why other users could change ``path``, or None."""
    uid = os.geteuid()
    if st.st_uid not in (0, uid):
        return f"owned by uid {st.st_uid}, not by you (uid {uid}) or root"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        who = "group and others" if mode & 0o022 == 0o022 else "group" if mode & 0o020 else "others"
        return f"writable by {who} (mode {mode:04o})"
    return None


def check_strict_modes(trust_file: Path, stop: Path) -> None:
    """Refuse ``trust_file`` if it, or a folder from its folder up to ``stop``
    (inclusive), could be changed by another user; ``stop`` must be an ancestor."""
    if os.name == "nt":  # pragma: no cover - POSIX ownership and modes only
        return
    stop = Path(os.path.abspath(stop))
    chain = [Path(os.path.abspath(trust_file))]
    folder = chain[0].parent
    while True:
        chain.append(folder)
        if folder == stop or folder.parent == folder:
            break
        folder = folder.parent
    for item in chain:
        st = item.stat()  # follows links, like ssh's stat(): the target is what is read
        why = _insecure(item, st)
        if why is not None:
            kind = "trust file" if item == chain[0] else "folder on the trust file's path"
            raise InsecureTrustPathError(
                f"refusing the trust file: {kind} {item} is {why}",
                path=str(item),
                expected="owned by you or root and not writable by group or others "
                "(like ssh's StrictModes)",
                observed=why,
                hint=f"if this trust file is yours: chmod go-w {item}; otherwise someone "
                "else may have planted it -- pass --trust PATH or set FTMANIFEST_TRUST_FILE",
            )
