"""Images are data: their pixels are judged by nothing, their metadata is text.

Layer: judging rooms - edge of the scanner (reads one file).  An image holds no code,
but its metadata is free text that cameras, editors and scrapers fill: PNG text chunks
(``tEXt``, ``zTXt``, ``iTXt``, ``eXIf``), JPEG ``APPn`` segments (EXIF, XMP, ICC) and
comments, GIF comment and application extensions, WebP ``EXIF`` and ``XMP`` chunks.
Those go to the text scanner (compressed ones inflated, capped); the pixels are skipped.
BMP has no metadata.  TIFF's tags are not read here: a TIFF is an ``info`` row saying
so.  An image whose structure breaks before its metadata ends is an error
(``image.malformed``), never clean.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from ftmanifest.findings import Finding
from ftmanifest.held import open_binary
from ftmanifest.scan.unscanned import malformed

MAX_TEXT = 16 << 20  # metadata bytes handed to the scanner per file, inflated included
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FORMATS = ("png", "jpeg", "gif", "webp", "bmp", "tiff")


def _trailing_finding(where: str, fmt: str, size: int) -> Finding:
    shown = f"{size} bytes" if size <= MAX_TEXT else f"over {MAX_TEXT} bytes"
    return Finding(
        kind="malformed",
        rule="image.trailing-data",
        message=f"{shown} follow the {fmt} image's end; no viewer shows them "
        "(scanned as text where they are text)",
        path=where,
        severity="warning",
        expected="nothing after the image's last block",
        observed=shown,
        hint="re-save the image with an image library; find out what appended the bytes",
        extra={"format": fmt},
    )


def image_kind(head: bytes) -> str | None:
    if head.startswith(PNG_MAGIC):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    if head[:2] == b"BM" and len(head) >= 26 and head[14:18] in _BMP_HEADERS:
        return "bmp"
    return None


_BMP_HEADERS = {struct.pack("<I", n) for n in (12, 40, 52, 56, 64, 108, 124)}


class _Malformed(Exception):
    pass


def scan_image(path: Path, fmt: str, scanner: Callable[..., list[Finding]] | None) -> list[Finding]:
    where = str(path)
    if fmt == "bmp":
        return []
    if fmt == "tiff":
        return [
            Finding(
                kind="not-scanned",
                rule="image.metadata-not-read",
                message="TIFF tags (descriptions, EXIF, XMP) are not read by this version",
                path=where,
                severity="info",
                extra={"format": fmt},
            )
        ]
    readers = {"png": _png, "jpeg": _jpeg, "gif": _gif, "webp": _webp}
    out: list[Finding] = []
    budget = [MAX_TEXT]
    try:
        with open_binary(path) as fh:
            for label, text in readers[fmt](fh):
                if label == TRAILING:
                    out.append(_trailing_finding(where, fmt, len(text)))
                budget[0] -= len(text)
                if budget[0] < 0:
                    raise _Malformed(f"over {MAX_TEXT} bytes of metadata")
                if scanner is not None and text:
                    decoded = text.decode("utf-8", "replace")
                    out += scanner(decoded, path=where, extra={"format": fmt, "member": label})
    except (_Malformed, struct.error, zlib.error) as exc:
        out.append(
            malformed(
                where,
                "image.malformed",
                f"{fmt} image unreadable: {exc}",
                expected=f"a whole {fmt} file",
                hint="re-save the image with an image library, or drop it",
            )
        )
    return out


TRAILING = "after the image's end"


def _trailing(fh: IO[bytes]) -> Iterator[tuple[str, bytes]]:
    """Bytes after the image's last block: no viewer shows them, anything can hide there."""
    rest = fh.read(MAX_TEXT + 1)
    if rest.strip(b"\0\r\n\t "):
        yield TRAILING, rest


def _take(fh: IO[bytes], n: int, what: str) -> bytes:
    data = fh.read(n)
    if len(data) < n:
        raise _Malformed(f"the file ends inside {what}")
    return data


def _inflate(data: bytes) -> bytes:
    d = zlib.decompressobj()
    out = d.decompress(data, MAX_TEXT + 1)
    if len(out) > MAX_TEXT:
        raise _Malformed(f"a compressed text inflates past {MAX_TEXT} bytes")
    return out


def _png(fh: IO[bytes]) -> Iterator[tuple[str, bytes]]:
    _take(fh, 8, "the signature")
    while True:
        length, kind = struct.unpack(">I4s", _take(fh, 8, "a chunk header"))
        name = kind.decode("latin-1")
        if kind in (b"tEXt", b"zTXt", b"iTXt", b"eXIf"):
            data = _take(fh, length, f"chunk {name}")
            yield name, _png_text(kind, data)
            _take(fh, 4, f"chunk {name}'s CRC")
        else:
            _skip(fh, length + 4, f"chunk {name}")
        if kind == b"IEND":
            yield from _trailing(fh)
            return


def _png_text(kind: bytes, data: bytes) -> bytes:
    if kind == b"eXIf":
        return data
    keyword, _, rest = data.partition(b"\0")
    if kind == b"tEXt":
        return keyword + b": " + rest
    if kind == b"zTXt":
        return keyword + b": " + _inflate(rest[1:])
    flag, rest = rest[:1], rest[2:]  # compression flag, method
    _lang, _, rest = rest.partition(b"\0")
    translated, _, text = rest.partition(b"\0")
    return keyword + b" " + translated + b": " + (_inflate(text) if flag == b"\1" else text)


def _skip(fh: IO[bytes], n: int, what: str) -> None:
    here = fh.tell()
    end = fh.seek(0, 2)
    if here + n > end:
        raise _Malformed(f"the file ends inside {what}")
    fh.seek(here + n)


def _jpeg(fh: IO[bytes]) -> Iterator[tuple[str, bytes]]:
    _take(fh, 2, "the start marker")
    while True:
        marker = _take(fh, 2, "a marker")
        while marker[1:] == b"\xff":  # fill bytes
            marker = marker[1:] + _take(fh, 1, "a marker")
        if marker[0] != 0xFF:
            raise _Malformed(f"byte {marker[0]:#04x} where a marker belongs")
        code = marker[1]
        if code == 0xD9 or code == 0xDA:  # end of image, or start of scan: pixels follow
            return
        if 0xD0 <= code <= 0xD7 or code == 0x01:
            continue  # markers without a length
        (length,) = struct.unpack(">H", _take(fh, 2, "a segment length"))
        if length < 2:
            raise _Malformed(f"segment {code:#04x} of length {length}")
        if 0xE0 <= code <= 0xEF or code == 0xFE:
            label = "COM" if code == 0xFE else f"APP{code - 0xE0}"
            yield label, _take(fh, length - 2, f"segment {label}")
        else:
            _skip(fh, length - 2, f"segment {code:#04x}")


def _gif(fh: IO[bytes]) -> Iterator[tuple[str, bytes]]:
    _take(fh, 6, "the signature")
    screen = _take(fh, 7, "the screen descriptor")
    if screen[4] & 0x80:
        _skip(fh, 3 << ((screen[4] & 7) + 1), "the colour table")
    while True:
        block = _take(fh, 1, "a block")[0]
        if block == 0x3B:  # trailer
            yield from _trailing(fh)
            return
        if block == 0x21:
            label = _take(fh, 1, "an extension label")[0]
            data = _sub_blocks(fh)
            if label in (0xFE, 0xFF):
                yield ("comment" if label == 0xFE else "application"), data
        elif block == 0x2C:
            desc = _take(fh, 9, "an image descriptor")
            if desc[8] & 0x80:
                _skip(fh, 3 << ((desc[8] & 7) + 1), "a local colour table")
            _take(fh, 1, "the LZW code size")
            _sub_blocks(fh, keep=False)
        else:
            raise _Malformed(f"block {block:#04x} is no GIF block")


def _sub_blocks(fh: IO[bytes], keep: bool = True) -> bytes:
    parts = []
    while size := _take(fh, 1, "a sub-block")[0]:
        if keep:
            parts.append(_take(fh, size, "a sub-block"))
        else:
            _skip(fh, size, "a sub-block")
    return b"".join(parts)


def _webp(fh: IO[bytes]) -> Iterator[tuple[str, bytes]]:
    _, size = struct.unpack("<4sI", _take(fh, 8, "the RIFF header"))
    _take(fh, 4, "the WEBP tag")
    end = 8 + size
    while fh.tell() < end:
        kind, length = struct.unpack("<4sI", _take(fh, 8, "a chunk header"))
        name = kind.decode("latin-1").strip()
        if kind in (b"EXIF", b"XMP "):
            yield name, _take(fh, length, f"chunk {name}")
        else:
            _skip(fh, length, f"chunk {name}")
        if length % 2:
            _skip(fh, 1, "chunk padding")
