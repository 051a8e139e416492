"""Folders reached through descriptors held open, never through path strings.

Layer: judging rooms - edge (the file system).  Restore opens DEST's parent once and
reaches every folder below it from its own parent's descriptor (``openat`` with
``O_DIRECTORY|O_NOFOLLOW``), so a parent renamed or swapped for a symlink while it runs
redirects nothing, and no path is built as one string: PATH_MAX never applies (each name
is at most 255 bytes, ``index.NAME_MAX_BYTES``).  Going up is ``..`` of a folder this
code made, inside a staging folder only its user can change, so only one descriptor per
walk is open however deep the tree.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
DIR_FLAGS |= getattr(os, "O_CLOEXEC", 0)


def open_dir(name: str, dir_fd: int | None = None) -> int:
    """A descriptor of folder ``name`` (of ``dir_fd``); a symlink there is refused."""
    return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


class Folders:
    """The folders below a held ``root``, by their names from it.

    ``made``: a set of '/'-joined paths; when given, a folder not yet in it is
    created (mode 0700; it fails if anything is there) as it is reached.
    """

    def __init__(self, root: int, made: set[str] | None = None) -> None:
        self.root = root
        self.made = made
        self.names: list[str] = []
        self.fd = root

    def reach(self, parts: Sequence[str]) -> int:
        """The descriptor of folder ``parts``, valid until the next call."""
        same = 0
        while same < min(len(parts), len(self.names)) and self.names[same] == parts[same]:
            same += 1
        while len(self.names) > same:
            self._enter("..")
            self.names.pop()
        for name in parts[same:]:
            if self.made is not None:
                rel = "/".join([*self.names, name])
                if rel not in self.made:
                    os.mkdir(name, 0o700, dir_fd=self.fd)
                    self.made.add(rel)
            self._enter(name)
            self.names.append(name)
        return self.fd

    def _enter(self, name: str) -> None:
        fd = open_dir(name, self.fd)
        self.close()
        self.fd = fd

    def close(self) -> None:
        if self.fd != self.root:
            os.close(self.fd)
            self.fd = self.root


def remove_tree(parent: int, name: str) -> None:
    """Delete folder ``name`` of ``parent`` and everything in it, through
    descriptors and without recursion; read-only folders are made writable
    first.  Only for folders this process made or checked are its own."""
    fd = _open_writable(name, parent)
    below: list[str] = []
    try:
        while True:
            sub = _empty_but_folders(fd)
            if sub is None and not below:
                break
            new = _open_writable(sub, fd) if sub is not None else open_dir("..", fd)
            os.close(fd)
            fd = new
            if sub is not None:
                below.append(sub)
            else:
                os.rmdir(below.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def _open_writable(name: str, parent: int) -> int:
    try:
        fd = open_dir(name, parent)
    except PermissionError:  # mode 0o000 or 0o100: lstat'ed a folder by the caller
        os.chmod(name, 0o700, dir_fd=parent)
        fd = open_dir(name, parent)
    os.fchmod(fd, 0o700)
    return fd


def _empty_but_folders(fd: int) -> str | None:
    """Unlink every non-folder of ``fd``; the name of a folder left, or None."""
    for child in os.listdir(fd):
        st = os.stat(child, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            return child
        os.unlink(child, dir_fd=fd)
    return None
