"""Inflate compressed artifacts as a bounded stream: gzip, bz2, xz, lzma, zlib, joblib.

Layer: judging rooms - edge helper of the scanner (wraps a byte stream; the pure walkers
read what comes out).  ``joblib.load`` and ``pickle.load(gzip.open(...))`` unpickle what
these containers inflate to, so the scanner must see the same bytes.  Magic numbers
follow ``joblib/compressor.py`` (``_ZLIB_PREFIX`` ``\\x78``, ``_GZIP_PREFIX``,
``_BZ2_PREFIX`` ``BZ``, ``_XZ_PREFIX``, ``_LZMA_PREFIX`` ``\\x5d\\x00``,
``_LZ4_PREFIX``) and ``numpy_pickle_compat`` (the pre-0.9.3 ``ZF`` container: ``ZF``, a
hex length padded to 19 bytes, then a zlib stream).  Nothing is inflated whole: reads
return at most what was asked, and the total is capped; at the cap the stream ends and
``capped`` says so, so the caller reports the file as not scanned instead of clean.
Concatenated gzip/bz2/xz members are followed, as ``gzip.open`` and joblib do.
"""

from __future__ import annotations

import bz2
import io
import lzma
import zlib
from typing import IO, Any

MAX_INFLATED = 4 << 30  # default cap on inflated bytes per compressed stream
READ = 1 << 20  # compressed bytes read per step
ZF_HEADER = 2 + len(hex(2**64))  # b"ZF" + the length field joblib writes
LZ4_MAGIC = b"\x04\x22\x4d\x18"


def compression_of(head: bytes) -> str | None:
    """The compression a stream starting with ``head`` uses, or None."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh"):
        return "bz2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"ZF") and _is_zf(head):
        return "joblib-zfile"
    if head.startswith(LZ4_MAGIC):
        return "lz4"
    if len(head) >= 2 and head[0] == 0x78 and (head[0] << 8 | head[1]) % 31 == 0:
        return "zlib"  # RFC 1950: CMF 0x78 (deflate, 32K window), FCHECK
    if head.startswith(b"\x5d\x00\x00"):
        return "lzma"  # lzma-alone: properties 0x5d, then a little-endian dict size
    return None


def _is_zf(head: bytes) -> bool:
    length = head[2:ZF_HEADER].strip()
    return length.startswith(b"0x") and all(c in b"0123456789abcdef" for c in length[2:])


def _decompressor(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if kind in ("zlib", "joblib-zfile"):
        return zlib.decompressobj(zlib.MAX_WBITS)
    if kind == "bz2":
        return bz2.BZ2Decompressor()
    if kind == "xz":
        return lzma.LZMADecompressor(lzma.FORMAT_XZ)
    if kind == "lzma":
        return lzma.LZMADecompressor(lzma.FORMAT_ALONE)
    raise ValueError(f"no decompressor for {kind}")


class Inflated(io.RawIOBase):
    """A read-only stream of what ``raw`` inflates to, ending at ``cap`` bytes."""

    def __init__(self, raw: IO[bytes], kind: str, cap: int = MAX_INFLATED) -> None:
        super().__init__()
        self.raw, self.kind, self.cap = raw, kind, cap
        self.produced = 0
        self.capped = False
        self.error: str | None = None  # why inflating stopped early
        self._dec = _decompressor(kind)
        self._pending = b""  # compressed input not yet handed to the decompressor
        self._done = False
        if kind == "joblib-zfile":
            header = raw.read(ZF_HEADER)
            nxt = raw.read(1)  # joblib <= 0.8.4 wrote one more space
            self._pending = b"" if nxt == b" " else nxt
            if len(header) < ZF_HEADER:
                self.error, self._done = "truncated joblib ZF header", True

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self.raw.close()
        super().close()

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._inflate(len(buffer))
        except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as exc:
            # the stream ends here for the walker; the caller reports why
            self.error, self._done, data = str(exc) or type(exc).__name__, True, b""
        buffer[: len(data)] = data
        return len(data)

    def _inflate(self, want: int) -> bytes:
        left = self.cap - self.produced
        if left <= 0:
            while not self._done:  # is there a byte past the cap?
                if self._inflate_step(1):
                    self.capped = True
                    self._done = True
            return b""
        want = min(want, left)
        while not self._done:
            out = self._inflate_step(want)
            if out:
                self.produced += len(out)
                return out
        return b""

    def _inflate_step(self, want: int) -> bytes:
        """Up to ``want`` inflated bytes; b"" while input is being consumed."""
        dec = self._dec
        if dec.eof:
            rest = dec.unused_data + self._pending
            self._pending = b""
            if self.kind in ("gzip", "bz2", "xz") and (rest or self._more()):
                self._dec = _decompressor(self.kind)  # next concatenated member
                self._pending = rest or self._pending
                return b""
            self._done = True
            return b""
        if self.kind in ("gzip", "zlib", "joblib-zfile"):
            data = dec.unconsumed_tail or self._pending or self.raw.read(READ)
            self._pending = b""
            if not data:
                out = dec.flush()
                if not dec.eof:
                    raise EOFError(f"{self.kind} stream ends before its end marker")
                self._done = True
                return out[:want]
            return dec.decompress(data, want)
        if dec.needs_input:
            data = self._pending or self.raw.read(READ)
            self._pending = b""
            if not data:
                raise EOFError(f"{self.kind} stream ends before its end marker")
        else:
            data = b""
        return dec.decompress(data, want)

    def _more(self) -> bool:
        self._pending = self.raw.read(READ)
        return bool(self._pending)


def open_inflated(raw: IO[bytes], kind: str, cap: int = MAX_INFLATED) -> io.BufferedReader:
    """A buffered, peekable reader over ``Inflated``; ``.raw`` is the Inflated."""
    return io.BufferedReader(Inflated(raw, kind, cap), buffer_size=1 << 16)
