"""A one-line progress bar on stderr for terminals, silent with ``-q/--quiet``.

Layer: file access (writes to stderr).  The bar is drawn only when the stream is
a terminal (``TERM`` not ``dumb``), the process is not quiet, and the work has
lasted longer than ``delay`` seconds (``$FTMANIFEST_PROGRESS_DELAY``, default
1), so quick commands, pipes, CI logs and tests stay silent.  Thread-safe:
hashing workers call ``advance`` concurrently.  No dependency:
``\\r``-rewritten lines.

Quiet is one switch for the process (``output.set_quiet``; ``quieted`` for a
block, as ``cli.main`` runs a command given ``-q``): no bar, no
``output.note``.  Warnings and errors are not written through either, so quiet
never hides them, and it changes no exit code.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, TextIO

from ftmanifest.output import is_quiet, set_quiet

DELAY_ENV = "FTMANIFEST_PROGRESS_DELAY"
DELAY = 1.0  # seconds of work before the bar appears, unless $FTMANIFEST_PROGRESS_DELAY


class ProgressSink(Protocol):
    """What long work reports to: bytes (and items: files, records) to do, then done."""

    def add_total(self, nbytes: int, items: int = 0) -> None: ...

    def advance(self, nbytes: int, items: int = 0) -> None: ...


@contextmanager
def quieted(on: bool) -> Iterator[None]:
    """The process quiet (``on``, ``output.set_quiet``) while the block runs, as it
    was afterwards."""
    before = set_quiet(on)
    try:
        yield
    finally:
        set_quiet(before)


def live(stream: TextIO) -> bool:
    """Whether a status line that rewrites itself may be drawn on ``stream``: a
    terminal that is not ``dumb``, and the process not quiet."""
    return not is_quiet() and _is_terminal(stream)


def format_bytes(n: float) -> str:
    """``1.5 GiB`` style, binary units."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def render_line(
    label: str,
    done: int,
    total: int,
    elapsed: float,
    *,
    unit: str | None = None,
    items: tuple[int, int] = (0, 0),
) -> str:
    """``hashing  1.0 GiB / 4.0 GiB  25%  1.2 GiB/s  ETA 3s``.

    With ``unit`` (``files``, ``records``) the items (done, total) are what the
    share and the time left count, and the bytes read are shown as done:
    ``scanning  120 / 3,000 files  1.0 GiB    4%  80.0 MiB/s  ETA 95s``; with no
    total, only what is done (``data check  1,200 records  1.0 KiB  512 B/s``)."""
    parts = [label]
    if unit is None:
        parts.append(f"{format_bytes(done)} / {format_bytes(total)}")
        share = (done, total)
    else:
        parts.append(f"{items[0]:,} / {items[1]:,} {unit}" if items[1] else f"{items[0]:,} {unit}")
        parts.append(format_bytes(done))
        share = items
    n, of = share
    if of > 0:
        parts.append(f"{min(100, n * 100 // of):3d}%")
    parts.append(f"{format_bytes(done / elapsed if elapsed > 0 else 0.0)}/s")
    if n > 0 and of > n and elapsed > 0:
        parts.append(f"ETA {int(elapsed * (of - n) / n)}s")
    return "  ".join(parts)


def progress_delay() -> float:
    """``$FTMANIFEST_PROGRESS_DELAY`` seconds (0 or more), else ``DELAY``."""
    try:
        return max(0.0, float(os.environ.get(DELAY_ENV, "")))
    except ValueError:
        return DELAY


class Progress:
    """Counts bytes (and ``unit`` items); draws ``render_line`` on a terminal after
    ``delay`` seconds (default: ``progress_delay()``).

    ``enabled=None`` decides from the stream and the process (``live``).  Use as
    a context manager, or call ``close`` to erase the line.
    """

    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        label: str = "hashing",
        unit: str | None = None,
        delay: float | None = None,
        interval: float = 0.1,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.unit = unit
        self.delay = progress_delay() if delay is None else delay
        self.interval = interval
        self.enabled = live(self.stream) if enabled is None else enabled
        self.total = 0
        self.done = 0
        self.items_total = 0
        self.items_done = 0
        self._clock = clock
        self._start = clock()
        self._last_draw = float("-inf")
        self._width = 0
        self._lock = threading.Lock()

    def add_total(self, nbytes: int, items: int = 0) -> None:
        with self._lock:
            self.total += nbytes
            self.items_total += items

    def advance(self, nbytes: int, items: int = 0) -> None:
        with self._lock:
            self.done += nbytes
            self.items_done += items
            if not self.enabled:
                return
            now = self._clock()
            if now - self._start < self.delay or now - self._last_draw < self.interval:
                return
            self._last_draw = now
            line = render_line(
                self.label, self.done, self.total, now - self._start,
                unit=self.unit, items=(self.items_done, self.items_total),
            )  # fmt: skip
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
