"""Protobuf's wire format, read from a seekable stream with every length checked.

Layer: judging rooms - pure core scanner (bytes in, fields out).  Shared by the ONNX and
TensorFlow judges, which know their messages' field numbers; a varint over ten
bytes, a deprecated group, or a length that runs past its message is
``Malformed``.
"""

from __future__ import annotations

from typing import IO

VARINT, FIXED64, BYTES, FIXED32 = 0, 1, 2, 5


class Malformed(Exception):
    pass


class BytesReader:
    """Just enough of a file over ``bytes`` for ``_Reader``."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def seek(self, pos: int, whence: int = 0) -> int:
        self.pos = pos
        return pos

    def tell(self) -> int:
        return self.pos


class Reader:
    """Protobuf wire format from a seekable stream, every length checked against its bounds."""

    def __init__(self, fh: IO[bytes] | BytesReader, size: int) -> None:
        self.fh, self.size = fh, size

    @property
    def pos(self) -> int:
        return self.fh.tell()

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            b = self.fh.read(1)
            if not b:
                raise Malformed("the file ends inside a number")
            value |= (b[0] & 0x7F) << shift
            if b[0] < 0x80:
                return value
            shift += 7
            if shift > 63:
                raise Malformed(f"a number over 10 bytes at offset {self.pos}")

    def tag(self) -> tuple[int, int]:
        key = self.varint()
        field, wire = key >> 3, key & 7
        if field == 0 or wire not in (VARINT, FIXED64, BYTES, FIXED32):
            raise Malformed(f"field {field} with wire type {wire} at offset {self.pos}")
        return field, wire

    def skip(self, wire: int, end: int) -> None:
        if wire == VARINT:
            self.varint()
            return
        n = {FIXED64: 8, FIXED32: 4}.get(wire) or self.length(end)
        self.seek_to(self.pos + n, end)

    def length(self, end: int) -> int:
        n = self.varint()
        if n > end - self.pos:
            raise Malformed(f"a field of {n} bytes runs past its end at offset {self.pos}")
        return n

    def seek_to(self, pos: int, end: int) -> None:
        if pos > end:
            raise Malformed(f"a field runs past its end at offset {self.pos}")
        self.fh.seek(pos)
