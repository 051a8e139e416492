"""A one-line progress bar with bytes/s, for terminals only.

Layer: file access (writes to stderr).  Drawn only when the stream is a TTY and
the work has lasted longer than ``delay`` seconds, so quick commands, pipes,
CI logs and tests stay silent.  Thread-safe: hashing workers call
``advance`` concurrently.  No dependency: ``\\r``-rewritten lines.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Protocol, TextIO


class ProgressSink(Protocol):
    """What the hashing engine reports to: bytes to do, then bytes done."""

    def add_total(self, nbytes: int) -> None: ...

    def advance(self, nbytes: int) -> None: ...


def format_bytes(n: float) -> str:
    """``1.5 GiB`` style, binary units."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def render_line(label: str, done: int, total: int, elapsed: float) -> str:
    """``hashing  1.0 GiB / 4.0 GiB  25%  1.2 GiB/s  ETA 3s``."""
    rate = done / elapsed if elapsed > 0 else 0.0
    parts = [label, f"{format_bytes(done)} / {format_bytes(total)}"]
    if total > 0:
        parts.append(f"{min(100, done * 100 // total):3d}%")
    parts.append(f"{format_bytes(rate)}/s")
    if rate > 0 and total > done:
        parts.append(f"ETA {int((total - done) / rate)}s")
    return "  ".join(parts)


class Progress:
    """Counts bytes; draws ``render_line`` on a TTY after ``delay`` seconds.

    ``enabled=None`` decides from the stream (a TTY, and ``TERM`` not
    ``dumb``).  Use as a context manager, or call ``close`` to erase the line.
    """

    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        label: str = "hashing",
        delay: float = 1.0,
        interval: float = 0.1,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.delay = delay
        self.interval = interval
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self.total = 0
        self.done = 0
        self._clock = clock
        self._start = clock()
        self._last_draw = float("-inf")
        self._width = 0
        self._lock = threading.Lock()

    def add_total(self, nbytes: int) -> None:
        with self._lock:
            self.total += nbytes

    def advance(self, nbytes: int) -> None:
        with self._lock:
            self.done += nbytes
            if not self.enabled:
                return
            now = self._clock()
            if now - self._start < self.delay or now - self._last_draw < self.interval:
                return
            self._last_draw = now
            line = render_line(self.label, self.done, self.total, now - self._start)
            pad = " " * max(0, self._width - len(line))
            self._width = len(line)
            self._write("\r" + line + pad)

    def close(self) -> None:
        """Erase the line if one was drawn."""
        with self._lock:
            if self._width:
                self._write("\r" + " " * self._width + "\r")
                self._width = 0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # closed or broken stderr: stop drawing
            self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False
