"""Reading a pickle's bytes for the walker: bounded reads and streamed constants.

Layer: pure core scanner.  Every read is checked against the byte cap;
constants over ``CHUNK`` are never held whole but decoded incrementally and
handed to the string sink chunk by chunk (a secret in a huge string is still
seen); malformed input stops the walk with a ``Problem``, never an exception.
"""

from __future__ import annotations

import codecs
from typing import IO, Any, NoReturn

from ftmanifest.scan.pickle_ops import (
    BIG,
    CHUNK,
    LINE_LIMIT,
    OPAQUE,
    Problem,
    StringSink,
    WalkResult,
)

OVERLAP_CHARS = 16 << 10  # longer than any secret match (JWT <= 12,100 characters)


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
    ) -> None:
        self.f = stream
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
    def _read(self, n: int) -> bytes:
        data = self.f.read(n)
        self.pos += len(data)
        if len(data) < n:
            self._fail("pickle.truncated", f"stream ends inside an opcode (needed {n} bytes)")
        return data

    def _line(self, limit: int = LINE_LIMIT) -> bytes:
        line = self.f.readline(limit + 1)
        self.pos += len(line)
        if not line.endswith(b"\n"):
            if len(line) <= limit:
                self._fail("pickle.truncated", "stream ends inside a text opcode")
            self._fail("pickle.line-too-long", f"text argument longer than {limit} bytes")
        return line[:-1]

    def _long_line(self, scan: bool = False) -> bytes | None:
        """A protocol-0 argument line: returned if short, else streamed to the newline.

        With ``scan``, the chunks of a long line go to the string sink as they pass.
        """
        line = self.f.readline(CHUNK + 1)
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
            line = self.f.readline(CHUNK)
            self.pos += len(line)
            if not line:
                self._fail("pickle.truncated", "stream ends inside a text opcode")

    def _check_bytes(self) -> None:
        if self.pos > self.max_bytes:
            self.res.capped = f"pickle longer than {self.max_bytes} bytes"
            raise _Stop

    def _fail(self, rule: str, message: str) -> NoReturn:
        self.res.problems.append(Problem(rule, message, self.op_pos))
        raise _Stop

    def _note(self, rule: str, message: str, kind: str = "malformed") -> None:
        if rule not in self._noted:
            self._noted.add(rule)
            self.res.problems.append(Problem(rule, message, self.op_pos, kind))

    def _const(self, n: int, mode: str) -> Any:
        """A length-prefixed constant: kept if small, else streamed in chunks.

        ``mode``: ``utf8`` (str), ``latin1`` (protocol-2 byte strings), ``bytes``,
        or ``skip`` (long integers: nothing to read in them).
        """
        if n < 0:
            self._fail("pickle.negative-length", "negative length for a constant")
        if n <= CHUNK:
            raw = self._read(n)
            if mode == "skip":
                return OPAQUE
            if mode == "bytes":
                self._emit(raw)
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
        left, scan, tail = n, mode != "skip", ""
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
