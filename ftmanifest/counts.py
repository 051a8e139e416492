"""Record counts of data files, computed from the same chunks as their digest.

Layer: file access, helpers for ``ftmanifest.hashing`` (pure over bytes, except
``count_file``, which reads a file).  What counts as a record:

- jsonl / ndjson / text / txt: non-blank lines, exactly
  ``sum(1 for line in binary_file if line.strip())``: lines end at ``\\n``;
  a line of ASCII whitespace only (space, ``\\t``, ``\\r``, ``\\v``, ``\\f``)
  is blank; a last line without ``\\n`` counts when it is not blank.
- csv / tsv: rows as ``csv.reader`` (default dialect, ``,`` or tab) yields
  them from the file opened as UTF-8 with ``newline=""``, minus a header row.
  Only ``"``, the delimiter, ``\\r`` and ``\\n`` move its state, all ASCII,
  so the bytes are scanned without decoding.  Where ``csv.reader`` raises
  instead (a field over ``csv.field_size_limit()``; a NUL byte on 3.10) the
  rows are still counted.
- json: the length of a top-level list, else 1.  parquet: rows in the
  footer metadata (pyarrow, when importable).  Both need the whole file:
  ``count_file`` reads it again.

Streaming counters take one chunk at a time (``Counter``) so a record can
span chunk boundaries.  Blank lines are rare, so the line counter counts
newlines and runs an exact regex pass only over chunks where a newline is
followed by whitespace (numpy, when importable, makes both steps cheap and
GIL-free; Hyperscan is not used: the 5.4 build here misses a match that ends
at the end of a buffer when a ``*`` repeats zero times).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ftmanifest.errors import InputError, InputNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ftmanifest.hashing.digests import FileDigest

LINE_FORMATS = frozenset({"jsonl", "ndjson", "text", "txt"})
DELIMITERS = {"csv": b",", "tsv": b"\t"}
COUNT_VERSION = 1  # part of every cache key: bump when a count's meaning changes
_CHUNK = 1 << 20
ACCEL_MIN = 1 << 18  # smaller chunks are counted without importing numpy (~0.15 s)
_WS = rb" \t\r\x0b\x0c"  # bytes.strip() whitespace, newline aside
_WS_BYTES = b" \t\r\x0b\x0c"  # the same bytes, for bytes.strip (_WS is regex text)
_NON_WS = re.compile(rb"[^\n" + _WS + rb"]")
_BLANK_AFTER = re.compile(rb"\n(?=[" + _WS + rb"]*\n)")  # a newline that opens a blank line
_QUOTE, _CR, _LF = ord('"'), ord("\r"), ord("\n")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class RecordCountError(InputError):
    """A data file cannot be counted (malformed JSON or parquet, unreadable).

    ``digest`` is the file's ``FileDigest`` when hashing got that far.
    """

    reason = "records-uncountable"
    digest: FileDigest | None = None


class Counter(Protocol):
    """Fed every chunk of a file in order; ``result`` after the last one."""

    def feed(self, chunk: memoryview) -> None: ...

    def result(self) -> int: ...


def format_of(path: Path, fmt: str | None = None) -> str:
    """The declared format, else the file's suffix, lower case."""
    return (fmt or path.suffix.lstrip(".")).lower()


def counter_for(fmt: str) -> Counter | None:
    """A fresh streaming counter for ``fmt``, or None when it cannot stream."""
    kind = fmt.lower()
    if kind in LINE_FORMATS:
        return LineCounter()
    if kind in DELIMITERS:
        return CsvCounter(DELIMITERS[kind], header=True)
    return None


def count_whole(fmt: str, data: bytes) -> int | None:
    """The records of ``data``, a whole small file, as ``counter_for(fmt)`` counts
    them; None when ``fmt`` has no streaming count.  A few lines are counted by
    splitting (a shard of one line costs a split and a strip, not a counter)."""
    kind = fmt.lower()
    if kind in LINE_FORMATS and data.count(b"\n") <= 16:
        return sum(1 for line in data.split(b"\n") if line.strip(_WS_BYTES))
    counter = counter_for(kind)
    if counter is None:
        return None
    counter.feed(memoryview(data))
    return counter.result()


def cache_key(fmt: str) -> str | None:
    """What a cached count is filed under, or None when ``fmt`` has no count here."""
    kind = fmt.lower()
    if kind in LINE_FORMATS:
        return f"lines/{COUNT_VERSION}"
    if kind in DELIMITERS or kind == "json" or (kind == "parquet" and _has_pyarrow()):
        return f"{kind}/{COUNT_VERSION}"
    return None


@functools.lru_cache(maxsize=1)
def _has_pyarrow() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def _buffer(chunk: memoryview) -> bytes | bytearray:
    """The chunk's bytes, without a copy when it spans its whole buffer."""
    obj = chunk.obj
    if isinstance(obj, (bytes, bytearray)) and chunk.contiguous and chunk.nbytes == len(obj):
        return obj
    return chunk.tobytes()


# --- lines ----------------------------------------------------------------------


class LineCounter:
    """Non-blank ``\\n``-separated lines.

    Per chunk: newlines are counted, and only a chunk where some newline is
    followed by a byte <= 0x20 (a blank or indented line: rare) gets the exact,
    slower regex pass.  With numpy (``accelerate``: None = for chunks of
    ``ACCEL_MIN`` bytes or more, when importable) both steps are vectorised
    and release the GIL; without it ``bytes.count`` counts and the regex pass
    runs on every chunk.  Either way the count is exact.
    """

    def __init__(self, *, accelerate: bool | None = None) -> None:
        self._accelerate = accelerate
        self._lines = 0  # newline-terminated lines that are not blank
        self._blank_so_far = True  # the line in progress has only whitespace yet
        self._scratch: Any = None  # numpy work arrays, reused chunk to chunk

    def feed(self, chunk: memoryview) -> None:
        data = _buffer(chunk)
        first = data.find(b"\n")
        if first < 0:
            if self._blank_so_far and _NON_WS.search(data):
                self._blank_so_far = False
            return
        last = data.rfind(b"\n")
        blank = int(self._blank_so_far and not _NON_WS.search(data, 0, first))
        np = self._numpy_for(len(data))
        if np is not None:
            newlines, suspect = self._scan(np, data, first, last)
        else:
            newlines, suspect = data.count(b"\n"), True
        if suspect and last > first:
            blank += len(_BLANK_AFTER.findall(data, first, last + 1))
        self._lines += newlines - blank
        self._blank_so_far = _NON_WS.search(data, last + 1) is None

    def _numpy_for(self, size: int) -> Any:
        if self._accelerate is False or (self._accelerate is None and size < ACCEL_MIN):
            return None
        return _numpy()

    def _scan(self, np: Any, data: bytes | bytearray, first: int, last: int) -> tuple[int, bool]:
        """Newlines, and whether one in ``[first, last)`` is followed by a byte <= 0x20."""
        n = len(data)
        if self._scratch is None or len(self._scratch[0]) < n:
            self._scratch = (np.empty(n, dtype=bool), np.empty(n, dtype=bool))
        a = np.frombuffer(data, dtype=np.uint8)
        is_nl = np.equal(a, 10, out=self._scratch[0][:n])
        suspect = self._scratch[1][first:last]
        np.less_equal(a[first + 1 : last + 1], 32, out=suspect)
        np.logical_and(suspect, is_nl[first:last], out=suspect)
        return int(np.count_nonzero(is_nl)), bool(suspect.any())

    def result(self) -> int:
        return self._lines + (not self._blank_so_far)


@functools.lru_cache(maxsize=1)
def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


# --- csv ------------------------------------------------------------------------


class CsvCounter:
    """Rows as ``csv.reader`` counts them: a quote-state scan over the bytes.

    csv.reader leaves a quoted field only at a quote not followed by another
    one; it enters one only at a quote that starts a field (after the
    delimiter or a line end), any other quote is a literal.  Outside quoted
    fields each ``\\r``, ``\\n`` or ``\\r\\n`` ends a row, empty lines too.
    """

    def __init__(self, delimiter: bytes, *, header: bool = False) -> None:
        self._delim = delimiter[0]
        self._header = header
        self._rows = 0
        self._quoted = False
        self._pending = False  # quoted, and the last byte was a quote: closing or doubled?
        self._prev: int | None = None  # the last byte fed

    def feed(self, chunk: memoryview) -> None:
        data = _buffer(chunk)
        n = len(data)
        if not n:
            return
        has_cr = data.find(b"\r") >= 0
        pos = 0
        if self._pending:
            self._pending = False
            if data[0] == _QUOTE:
                pos = 1  # "" inside a quoted field
            else:
                self._quoted = False
        elif not self._quoted and self._prev == _CR and data[0] == _LF:
            pos = 1  # the \n of a \r\n split between chunks
        while pos < n:
            if self._quoted:
                q = data.find(b'"', pos)
                if q < 0:
                    break
                if q + 1 == n:
                    self._pending = True
                    break
                if data[q + 1] == _QUOTE:
                    pos = q + 2
                    continue
                self._quoted, pos = False, q + 1
                continue
            start = pos
            while True:  # find a quote that opens a field
                q = data.find(b'"', pos)
                if q < 0:
                    break
                before = data[q - 1] if q else self._prev
                pos = q + 1
                if before is None or before in (self._delim, _CR, _LF):
                    break
            end = n if q < 0 else q
            self._rows += _line_ends(data, start, end, has_cr)
            if q < 0:
                break
            self._quoted = True
        self._prev = data[-1]

    def result(self) -> int:
        rows = self._rows
        if self._quoted or self._pending or self._prev not in (None, _CR, _LF):
            rows += 1  # the last row has no line end
        return max(0, rows - 1) if self._header else rows


def _line_ends(data: bytes | bytearray, start: int, end: int, has_cr: bool) -> int:
    ends = data.count(b"\n", start, end)
    if has_cr:
        ends += data.count(b"\r", start, end) - data.count(b"\r\n", start, end)
    return ends


# --- whole files ----------------------------------------------------------------


def count_file(path: str | os.PathLike[str], fmt: str) -> int | None:
    """Records in one file by reading it; None when ``fmt`` has no count here.

    Raises ``InputNotFoundError`` or ``RecordCountError`` (both ``InputError``).
    Never opens anything but a regular file (a FIFO would block).
    """
    kind = fmt.lower()
    if cache_key(kind) is None:
        return None
    p = Path(path)
    with open_regular(p, _count_error) as f:
        return count_stream(f, p, kind)


def count_stream(f: io.BufferedReader | io.FileIO, path: Path, fmt: str) -> int | None:
    """Records in the open file ``f`` (read from its start), named ``path`` in errors."""
    kind = fmt.lower()
    if cache_key(kind) is None:
        return None
    try:
        return _count_open(f, kind)
    except (OSError, ValueError) as exc:  # JSONDecodeError, pyarrow's ArrowInvalid
        raise _count_error(path, str(exc)) from exc


def open_regular(path: Path, error: Callable[[Path, str], InputError]) -> io.FileIO:
    """``path`` opened for reading, or ``error(path, reason)`` raised.

    Opened with O_NONBLOCK, so a FIFO cannot block the open, then refused by
    ``fstat`` before anything is read unless it is a regular file (a FIFO, a
    device, a folder).  Symlinks are followed, as hashing follows them.  A
    missing file is ``InputNotFoundError``.  Shared with ``ftmanifest.recordio``.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError as exc:
        raise InputNotFoundError(f"file not found: {path}", path=str(path)) from exc
    except OSError as exc:
        raise error(path, exc.strerror or str(exc)) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(path, "not a regular file")
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def _count_open(f: io.BufferedReader | io.FileIO, kind: str) -> int:
    if kind == "json":
        import json

        data = json.loads(f.read())
        return len(data) if isinstance(data, list) else 1
    if kind == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(f).metadata.num_rows)
    counter = counter_for(kind)
    assert counter is not None
    view = memoryview(bytearray(_CHUNK))
    while n := f.readinto(view):
        counter.feed(view[:n])
    return counter.result()


def _count_error(path: Path, reason: str) -> RecordCountError:
    return RecordCountError(
        f"cannot count records in {path}: {reason}",
        path=str(path),
        observed=reason,
        hint="fix the file or its declared format",
    )
