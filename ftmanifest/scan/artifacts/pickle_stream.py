"""Reading a pickle's bytes for the walker: bounded reads and streamed constants.

Layer: judging rooms - pure core scanner.  Every read is checked against the byte cap;
constants over ``CHUNK`` are never held whole but decoded incrementally and
handed to the string sink chunk by chunk (a secret in a huge string is still
seen); malformed input stops the walk with a ``Problem``, never an exception.
Protocol-0 number lines are parsed as CPython's ``_pickle.c`` does (``strtol``
then ``PyLong_FromString``, a NUL ends the number), so the walk knows where the
real unpickler would refuse a file - and where it would not.

Frames are read two ways, as CPython's C unpickler reads them: ``pickle.loads``
(and a file with ``peek``, such as ``open()``'s) ignores them; a file object
without ``peek`` (``io.BytesIO``: ``torch.load`` reads a zip's ``data.pkl`` so)
holds the frame in a buffer, and a read that does not fit in what is left of
it drops that rest and reads on after the frame.  ``drop_frames`` walks the
second reading.  No pickler writes an opcode across its frame's end, so every
straddle is an error finding (``pickle.frame-straddle``) in either reading.
"""

from __future__ import annotations

import codecs
import re
from typing import IO, Any, NoReturn

from ftmanifest.scan.artifacts.pickle_ops import (
    BIG,
    CHUNK,
    LINE_LIMIT,
    OPAQUE,
    Problem,
    StringSink,
    WalkResult,
)

OVERLAP_CHARS = 16 << 10  # longer than any secret match (JWT <= 12,100 characters)
SMALL_LONG = 1 << 10  # LONG1/LONG4 constants up to this many bytes keep their value
_SPACE = rb" \t\n\v\f\r"
# C strtol(s, &end, 0), the first try of _pickle.c's load_int
_STRTOL = re.compile(rb"[%s]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)" % _SPACE)
# PyOS_string_to_double: no leading space; load_float wants '\n' or NUL after it
_STRTOD = re.compile(
    rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf(?:inity)?|nan))"
)
# characters a number line longer than LINE_LIMIT may hold before a NUL (checked loosely)
_LONG_NUMBER = {
    "INT": re.compile(rb"[0-9a-fA-FxXoO_+\-%s]*" % _SPACE),
    "LONG": re.compile(rb"[0-9a-fA-FxXoOL_+\-%s]*" % _SPACE),
    "FLOAT": re.compile(rb"[0-9.eE+\-]*"),
    "GET": re.compile(rb"[0-9_+\-%s]*" % _SPACE),
}
_LONG_NUMBER["PUT"] = _LONG_NUMBER["GET"]
_DOTTED = re.compile(r"[\w.]*")


class _Stop(Exception):
    pass


class PickleStream:
    """The byte side of the walk: bounded reads, constants streamed in chunks."""

    def __init__(
        self,
        stream: IO[bytes],
        *,
        on_string: StringSink | None = None,
        max_bytes: int = 1 << 31,
        max_opcodes: int = 2_000_000,
        base: int = 0,
        strict: bool = False,
        drop_frames: bool = False,
        joblib: bool = False,
    ) -> None:
        self.f = stream
        self.joblib = joblib  # read as joblib.load does: array bytes after a wrapper's BUILD
        self.raw_bytes = 0  # of those, read past (they do not count against max_bytes)
        self.strict = strict  # stop where the real unpickler would raise, or act
        self.drop_frames = drop_frames  # read frames as the C unpickler reads a BytesIO
        self.frame_end: int | None = None  # where the current frame's bytes end
        self.on_string = on_string
        self.max_bytes = max_bytes
        self.max_opcodes = max_opcodes
        self.pos = base
        self.res = WalkResult()
        self.stack: list[Any] = []
        self.meta: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.op_pos = base
        self._noted: set[str] = set()

    # -- reading ------------------------------------------------------------
    def _read(self, n: int, *, into: bool = False) -> bytes:
        """``n`` bytes as the unpickler reads them: ``into`` for the payload of a
        bytes constant, which it copies from the frame's rest and then the file."""
        self._frame(n, into)
        data = self.f.read(n)
        self.pos += len(data)
        if len(data) < n:
            self._fail("pickle.truncated", f"stream ends inside an opcode (needed {n} bytes)")
        return data

    def frame(self, length: int) -> None:
        """FRAME: the next ``length`` bytes are its own (or, dropping, stay in the buffer)."""
        end = self.frame_end
        if self.drop_frames and end is not None and self.pos < end:
            if self.pos + length <= end:
                return  # read from the buffer it is in: the buffer's end still counts
            self._frame(length, False)  # a straddle: the rest is dropped, the frame read anew
        self.frame_end = self.pos + length

    def _frame(self, n: int, into: bool) -> None:
        end = self.frame_end
        if end is None:
            return
        if self.pos >= end:
            self.frame_end = None
        elif self.pos + n > end:
            self._straddle(end)
            if self.drop_frames and not into:
                self._skip(end - self.pos)

    def _straddle(self, end: int) -> None:
        self.frame_end = None
        if "pickle.frame-straddle" not in self._noted:
            self._noted.add("pickle.frame-straddle")
            self.res.problems.append(
                Problem(
                    "pickle.frame-straddle",
                    f"an opcode at offset {self.op_pos} reads past its frame's end at {end}: "
                    "pickle.loads and torch.load read what follows differently",
                    self.op_pos,
                    "unsafe-pickle",
                )
            )

    def _skip(self, n: int) -> None:
        while n > 0:
            data = self.f.read(min(n, CHUNK))
            if not data:
                return
            self.pos += len(data)
            n -= len(data)

    def _readline(self, size: int) -> bytes:
        """``readline(size)`` as the unpickler reads a line (the caller adds it to ``pos``)."""
        end = self.frame_end
        if end is not None and self.pos >= end:
            end = self.frame_end = None
        if end is None:
            return self.f.readline(size)
        avail = end - self.pos
        line = self.f.readline(min(size, avail))
        if line.endswith(b"\n") or len(line) == size or len(line) < avail:
            return line  # inside the frame (or the stream ended: the caller says so)
        self._straddle(end)
        if not self.drop_frames:
            return line + self.f.readline(size - len(line))
        self.pos += len(line)  # dropped with the frame's rest: the line comes after it
        return self.f.readline(size)

    def _line(self, limit: int = LINE_LIMIT, name: str = "") -> bytes:
        """An import's module or name line, up to ``limit`` bytes."""
        line = self._readline(limit + 1)
        self.pos += len(line)
        if not line.endswith(b"\n"):
            if len(line) <= limit:
                self._fail("pickle.truncated", "stream ends inside a text opcode")
            if not _DOTTED.fullmatch(line.decode("utf-8", "replace")):
                self._reject("pickle.bad-argument", f"{name} names a module no import finds")
            self.res.capped = (
                f"{name} argument longer than {limit} bytes (the walk's line limit); "
                "no module or attribute name is that long, but it was not judged"
            )
            raise _Stop
        return line[:-1]

    def _number(self, name: str) -> Any:
        """An INT/LONG/FLOAT/GET/PUT line's value; ``OPAQUE`` when too long to keep."""
        line = self._readline(LINE_LIMIT + 1)
        self.pos += len(line)
        if line.endswith(b"\n"):
            value = _c_number(name, line[:-1])
            if value is None:
                self._reject("pickle.bad-argument", f"{name} argument is not a number")
                return OPAQUE
            return value
        if len(line) <= LINE_LIMIT:
            self._fail("pickle.truncated", "stream ends inside a text opcode")
        # Longer than any number a pickler writes, but the unpickler reads it
        # whole (e.g. 'I' + 70,000 zeros + '1' is 1): stream it, check it loosely.
        allowed, nul = _LONG_NUMBER[name], False
        while True:
            if not nul:
                seg = line.rstrip(b"\n").split(b"\0", 1)
                nul = len(seg) > 1
                if not allowed.fullmatch(seg[0]):
                    self._reject("pickle.bad-argument", f"{name} argument is not a number")
            if line.endswith(b"\n"):
                return OPAQUE
            self._check_bytes()
            line = self._readline(CHUNK)
            self.pos += len(line)
            if not line:
                self._fail("pickle.truncated", "stream ends inside a text opcode")

    def _long_line(self, scan: bool = False) -> bytes | None:
        """A protocol-0 argument line: returned if short, else streamed to the newline.

        With ``scan``, the chunks of a long line go to the string sink as they pass.
        """
        line = self._readline(CHUNK + 1)
        self.pos += len(line)
        if line.endswith(b"\n"):
            return line[:-1]
        if len(line) <= CHUNK:
            self._fail("pickle.truncated", "stream ends inside a text opcode")
        dec = codecs.getincrementaldecoder("raw-unicode-escape")("replace")
        tail = ""
        while True:
            if scan:
                tail = self._emit_piece(dec.decode(line.rstrip(b"\n")), tail)
            if line.endswith(b"\n"):
                return None
            self._check_bytes()
            line = self._readline(CHUNK)
            self.pos += len(line)
            if not line:
                self._fail("pickle.truncated", "stream ends inside a text opcode")

    def _check_bytes(self) -> None:
        if self.pos - self.raw_bytes > self.max_bytes:
            self.res.capped = f"pickle longer than {self.max_bytes} bytes (max_pickle_bytes)"
            raise _Stop

    def _fail(self, rule: str, message: str) -> NoReturn:
        problem = Problem(rule, message, self.op_pos)
        self.res.problems.append(problem)
        if self.res.rejected is None:
            self.res.rejected = problem
        raise _Stop

    def _note(self, rule: str, message: str, kind: str = "malformed") -> None:
        if rule not in self._noted:
            self._noted.add(rule)
            self.res.problems.append(Problem(rule, message, self.op_pos, kind))
        self._reject(rule, message)

    def _reject(self, rule: str, message: str) -> None:
        """CPython's unpickler raises here: nothing after this runs in a loader.

        The lenient walk goes on (it reports what follows too); a strict one stops.
        """
        if self.res.rejected is None and self.res.reached is None:
            self.res.rejected = Problem(rule, message, self.op_pos)
        if self.strict:
            raise _Stop

    def _reach(self) -> None:
        """The real unpickler would import or call something here."""
        if self.res.rejected is None and self.res.reached is None:
            self.res.reached = self.op_pos
        if self.strict:
            raise _Stop

    def _const(self, n: int, mode: str) -> Any:
        """A length-prefixed constant: kept if small, else streamed in chunks.

        ``mode``: ``utf8`` (str), ``latin1`` (protocol-2 byte strings), ``bytes``,
        or ``long`` (integers: kept when small, nothing to read in them).
        """
        if n < 0:
            self._fail("pickle.negative-length", "negative length for a constant")
        self._frame(n, mode == "bytes")  # the whole constant is one read to the unpickler
        if n <= CHUNK:
            raw = self._read(n)
            if mode == "long":
                return int.from_bytes(raw, "little", signed=True) if n <= SMALL_LONG else OPAQUE
            if mode == "bytes":
                self._emit(raw)
                if raw[:1] == b"\x80" and len(raw) > 3 and 2 <= raw[1] <= 5:
                    self._stored_pickle(raw)
                return raw
            try:
                codec = ("utf-8", "surrogatepass") if mode == "utf8" else ("latin-1", "strict")
                value = raw.decode(*codec)
            except UnicodeDecodeError:
                self._fail("pickle.bad-argument", "string constant is not valid UTF-8")
            self._emit(value)
            return value
        errors = "surrogatepass" if mode == "utf8" else "strict"
        dec = codecs.getincrementaldecoder("utf-8")(errors)
        left, scan, tail = n, mode != "long" and self.on_string is not None, ""
        while left:
            self._check_bytes()
            raw = self._read(min(left, CHUNK))
            left -= len(raw)
            if scan:
                try:
                    tail = self._emit_piece(dec.decode(raw, final=not left), tail)
                except UnicodeDecodeError:
                    scan = False  # binary payload (tensor data), nothing to read
        return BIG

    nested = 0  # how deep this walk is inside bytes constants that are pickles

    def walk(self) -> WalkResult:  # pragma: no cover - the walker (``pickles``) defines it
        raise NotImplementedError

    def _stored_pickle(self, raw: bytes) -> None:
        """A bytes constant that is itself a pickle: code that unpickles it runs its imports.

        Walked as a pickle of its own (three levels at most); its imports and
        defects join this walk's, at the constant's offset and named so.
        """
        if self.nested >= 3:
            return
        from io import BytesIO

        inner = type(self)(BytesIO(raw), max_bytes=len(raw), max_opcodes=self.max_opcodes)
        inner.nested = self.nested + 1
        res = inner.walk()
        if not res.stopped:
            return  # bytes that merely start like a pickle
        where = f"in a pickle stored as bytes at offset {self.op_pos}"
        self.res.imports += [
            type(imp)(imp.module, imp.name, self.op_pos, f"{imp.opcode} {where}")
            for imp in res.imports
        ]
        self.res.problems += [
            type(p)(p.rule, f"{p.message} ({where})", self.op_pos, p.kind) for p in res.problems
        ]

    def _emit_piece(self, text: str, tail: str) -> str:
        """Emit one piece of a streamed constant behind the end of the previous one.

        A secret across a chunk boundary is thus seen whole; one inside the
        overlap is seen twice, at the same offset (the sink drops the repeat).
        Returns the next tail.
        """
        joined = tail + text
        self._emit(joined, force=True)
        return joined[-OVERLAP_CHARS:]

    def _emit(self, value: Any, force: bool = False) -> None:
        if self.on_string is None:
            return
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                return
        if isinstance(value, str) and (force or len(value) >= 6):
            self.on_string(self.op_pos, value)

    def _text_arg(self, name: str, raw: bytes) -> Any:
        try:
            if name == "UNICODE":
                value: str = raw.decode("raw-unicode-escape")
            else:
                if len(raw) < 2 or raw[:1] not in b"'\"" or raw[-1:] != raw[:1]:
                    self._fail("pickle.bad-argument", "STRING argument is not quoted")
                value = codecs.escape_decode(raw[1:-1])[0].decode("latin-1")
        except (UnicodeDecodeError, ValueError):
            self._fail("pickle.bad-argument", f"{name} argument cannot be decoded")
        self._emit(value)
        return value


def _c_number(name: str, text: bytes) -> Any:
    """``text``'s value as _pickle.c's load_int/long/float/get/put reads it; None: it raises."""
    if name == "FLOAT":
        head = text.split(b"\0", 1)[0]
        return float(head) if _STRTOD.fullmatch(head) else None
    if name == "INT":
        if not text:
            return None
        head = text.split(b"\0", 1)[0]
        m = _STRTOL.fullmatch(head)
        if m:
            digits = m.group(2)
            base = 16 if digits[1:2] in (b"x", b"X") else 8 if digits[:1] == b"0" else 10
            value = int(m.group(1) + digits, base)
            if -(1 << 63) <= value < 1 << 63:
                return value
        return _py_long(text, 0)
    if name == "LONG" and text.endswith(b"L"):
        text = text[:-1]
    return _py_long(text, 0 if name == "LONG" else 10)


def _py_long(text: bytes, base: int) -> Any:
    """PyLong_FromString on a C string: the text up to the first NUL."""
    try:
        return int(text.split(b"\0", 1)[0], base)
    except ValueError as exc:  # over sys.int_max_str_digits: a loader may lift that
        return OPAQUE if str(exc).startswith("Exceeds the limit") else None
