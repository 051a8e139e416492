"""A thread on one end of an OS pipe, and write-back hints: constant memory.

Layer: judging rooms - edge (threads, file descriptors).  The tar stream is written by a
thread into a pipe whose other end is the age child's stdin
(``agechild``); whichever side fails, the other is stopped by closing its
end of the pipe (``BrokenPipeError`` or end of file), and the first error
wins.  Chunks are 64 KiB: on the machines measured, 1 MiB writes were two to
ten times slower (they no longer fit the CPU caches).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import IO, Any

PIPE_BYTES = 1 << 20
CHUNK = 1 << 16  # 64 KiB: measured 2-10x faster than 1 MiB for writes (cache-sized)


def widen(fd: int) -> None:
    """Ask Linux for a 1 MiB pipe buffer (fewer context switches); harmless elsewhere."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (OSError, ImportError):
        pass


class Worker:
    """Run ``fn(stream)`` in a thread on one end of a new pipe.

    ``mode`` "wb": the thread writes, ``outer`` is the read end.
    ``mode`` "rb": the thread reads, ``outer`` is the write end.
    """

    def __init__(self, fn: Callable[[IO[bytes]], Any], mode: str) -> None:
        r, w = os.pipe()
        widen(w)
        inner_fd, outer_fd = (w, r) if mode == "wb" else (r, w)
        self.outer: IO[bytes] = os.fdopen(outer_fd, "rb" if mode == "wb" else "wb", CHUNK)
        self._inner: IO[bytes] = os.fdopen(inner_fd, mode, CHUNK)
        self._fn = fn
        self.error: BaseException | None = None
        self.result: Any = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="ftmanifest-backup")
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = self._fn(self._inner)
        except BaseException as exc:  # handed to the caller in finish()
            self.error = exc
        finally:
            try:
                self._inner.close()
            except OSError as exc:  # the other side went away first
                self.error = self.error or exc

    def finish(self) -> Any:
        """Close our end, wait for the thread, re-raise what it raised."""
        try:
            self.outer.close()
        except OSError:
            pass
        self._thread.join()
        if self.error is not None and not isinstance(self.error, BrokenPipeError):
            raise self.error
        return self.result

    def stop(self) -> BaseException | None:
        """Close our end after a failure; the thread's own error, if any."""
        try:
            self.outer.close()
        except OSError:
            pass
        self._thread.join()
        if isinstance(self.error, BrokenPipeError):
            return None
        return self.error


WRITEBACK = 8 << 20  # start the disk write of every 8 MiB as it is written


class Writeback:
    """Start the disk write of what was written to ``fd`` as it goes, so the
    fsync that must come before anything vouches for the bytes waits for the
    last few MiB rather than for the whole file.

    ``posix_fadvise(DONTNEED)`` on Linux starts writeback of the dirty range
    without waiting and drops the clean pages (a backup or restore is read
    once, it need not stay cached).  It is only a hint: the fsync after it is
    what makes the bytes durable, and where the call is missing nothing but
    the overlap is lost.
    """

    _ADVICE = getattr(os, "POSIX_FADV_DONTNEED", None)

    def __init__(self, fd: int, start: int = 0) -> None:
        self.fd = fd
        self.done = start
        self.pos = start

    def wrote(self, n: int) -> None:
        self.pos += n
        if self.pos - self.done >= WRITEBACK:
            self.flush_started()

    def flush_started(self) -> None:
        if self._ADVICE is None or self.pos <= self.done:
            return
        try:
            os.posix_fadvise(self.fd, self.done, self.pos - self.done, self._ADVICE)
        except OSError:  # a file system that takes no advice: fsync still follows
            self._ADVICE = None
        self.done = self.pos
