"""Files opened once per observation: what is judged is the inode that was hashed.

Layer: file access.  Inside ``holding()`` (``verify`` opens one around its
observation) hashing keeps the descriptor of each file it read instead of
closing it, and every later reader of that path in the same observation
(the scanner's format sniff, its text, pickle, archive and safetensors
readers, the adapter's header reads) opens it with ``open_binary``, which
reads the kept descriptor with ``pread``: the same bytes, no second
``open``, and nothing that was swapped in under the path since it was
hashed.  ``moved()`` names what changed under a kept path before the
observation ended, so a verdict over bytes that no longer sit there is an
error, never OK.

At most ``limit`` descriptors are kept (the first ones hashed; a quarter of
the process's open-file limit, at most ``LIMIT``); a path not kept is opened
as before.  Outside ``holding()`` nothing is kept and ``open_binary`` is
``open(path, "rb")``.  Forked scan workers adopt the kept descriptors
(``adopt``), which a fork inherits; ``pread`` leaves every reader its own
offset, so they never disturb one another.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeAlias

from ftmanifest.statcache import StatKey

LIMIT = 512
StrPath: TypeAlias = "str | os.PathLike[str]"


def _key(path: StrPath) -> str:
    return os.path.abspath(os.fspath(path))  # no syscall: the same spelling hashing keeps


class Held:
    """Descriptors kept by path (absolute, as spelled), each with the stat it was hashed at."""

    def __init__(self, limit: int, *, owner: bool = True) -> None:
        self.limit = limit
        self._owner = owner
        self._fds: dict[str, tuple[int, StatKey]] = {}
        self._lock = threading.Lock()  # hashing keeps descriptors from its worker threads

    def keep(self, path: StrPath, fd: int, key: StatKey) -> bool:
        """Take ownership of ``fd`` for ``path``; False (the caller closes it) when full."""
        if len(self._fds) >= self.limit:  # full: no path to spell (a million files)
            return False
        name = _key(path)
        with self._lock:
            if name in self._fds or len(self._fds) >= self.limit:
                return False
            self._fds[name] = (fd, key)
            return True

    def room(self) -> int:
        """How many more descriptors would be kept."""
        return max(0, self.limit - len(self._fds))

    def fd(self, path: StrPath) -> int | None:
        kept = self._fds.get(_key(path))
        return kept[0] if kept else None

    def descriptors(self) -> dict[str, int]:
        """Path -> descriptor, for workers that inherit them (``adopt``)."""
        return {name: fd for name, (fd, _) in self._fds.items()}

    def moved(self) -> list[tuple[str, str]]:
        """Each kept path whose file changed or was replaced since it was hashed, and how."""
        out = []
        for name, (_fd, key) in sorted(self._fds.items()):
            try:
                now = StatKey.of(os.stat(name))
                if (now.dev, now.ino) != (key.dev, key.ino):
                    out.append((name, "the path names another file than the one hashed"))
                elif now != key:
                    out.append((name, "the file was written to after it was hashed"))
            except FileNotFoundError:
                out.append((name, "the file was removed after it was hashed"))
            except OSError as exc:
                out.append((name, f"cannot stat it again: {exc.strerror or exc}"))
        return out

    def close(self) -> None:
        with self._lock:
            fds, self._fds = self._fds, {}
        if self._owner:
            for fd, _ in fds.values():
                os.close(fd)


_CURRENT: ContextVar[Held | None] = ContextVar("ftmanifest_held", default=None)


def _default_limit() -> int:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 64
    if soft == resource.RLIM_INFINITY:
        return LIMIT
    return max(0, min(LIMIT, soft // 4))


@contextmanager
def holding(limit: int | None = None) -> Iterator[Held]:
    """Keep what is hashed inside this block open; an enclosing block's registry is reused."""
    outer = _CURRENT.get()
    if outer is not None:
        yield outer
        return
    held = Held(_default_limit() if limit is None else limit)
    token = _CURRENT.set(held)
    try:
        yield held
    finally:
        _CURRENT.reset(token)
        held.close()


def current() -> Held | None:
    return _CURRENT.get()


def adopt(descriptors: Mapping[str, int]) -> None:
    """In a forked worker: read the descriptors the parent kept (and owns)."""
    held = Held(len(descriptors), owner=False)
    held._fds = {name: (fd, StatKey(0, 0, 0, 0, 0)) for name, fd in descriptors.items()}
    _CURRENT.set(held)


def kept(path: StrPath) -> int | None:
    """The descriptor hashing kept for ``path`` in this observation, if any (not yours to close)."""
    held = _CURRENT.get()
    return held.fd(path) if held is not None else None


def open_binary(path: StrPath) -> io.BufferedReader:
    """``path`` for reading: the kept descriptor when hashing kept one, else a new open."""
    fd = kept(path)
    if fd is None:
        return open(path, "rb")
    return reader(fd, os.fspath(path))


def reader(fd: int, name: str = "") -> io.BufferedReader:
    """A buffered, seekable reader of ``fd`` that has its own offset and never closes it."""
    return io.BufferedReader(_Positional(fd, name))


class _Positional(io.RawIOBase):
    """``pread`` on a descriptor someone else owns: independent offset, close leaves it open."""

    def __init__(self, fd: int, name: str) -> None:
        super().__init__()
        self._fd = fd
        self._pos = 0
        self.name = name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if hasattr(os, "preadv"):
            n = os.preadv(self._fd, [view], self._pos)
        else:  # pragma: no cover - platforms without preadv
            data = os.pread(self._fd, len(view), self._pos)
            n = len(data)
            view[:n] = data
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            pos = offset
        elif whence == os.SEEK_CUR:
            pos = self._pos + offset
        elif whence == os.SEEK_END:
            pos = os.fstat(self._fd).st_size + offset
        else:
            raise ValueError(f"invalid whence ({whence})")
        if pos < 0:
            raise OSError(22, "negative seek position")
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos
