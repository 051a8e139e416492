"""Read an ``.npy`` header and decide, by numpy's own rules, whether objects follow.

Layer: judging rooms - pure core scanner (reads a header from a stream, imports nothing
heavy).  ``numpy.lib.format`` reads the magic, a version of 1.0, 2.0 or 3.0, a 2- or
4-byte header length, then a header that is a Python dict literal (``ast.literal_eval``)
with exactly the keys ``descr``, ``fortran_order`` and ``shape``; ``descr_to_dtype``
turns ``descr`` into a dtype.  When that dtype ``hasobject`` the array's data is a
pickle, which ``numpy.load(allow_pickle= True)`` unpickles.  ``holds_objects`` mirrors
that decision without numpy: a descr it cannot classify as plain is ``UnknownDescr``
(the caller reports it as not scanned), so a spelling numpy reads as an object can never
pass as clean.
"""

from __future__ import annotations

import ast
import re
import struct
import sys
from dataclasses import dataclass
from typing import IO, Any

MAGIC = b"\x93NUMPY"
MAX_HEADER = 1 << 20  # numpy ignores max_header_size under allow_pickle; we do not
MAX_DEPTH = 64
_LENGTH = {1: ("<H", "latin-1"), 2: ("<I", "latin-1"), 3: ("<I", "utf-8")}
KEYS = frozenset({"descr", "fortran_order", "shape"})

# Character codes and sized kinds with no Python object in them (numpy/_core
# descriptor.c): bools, ints, floats, complex, bytes, str, void, datetimes.
_PLAIN = re.compile(
    r"[<>=|]?(?:[?bBhHiIlLqQpPnNefdgFDGc]|[biufc]\d+|[SaUV]\d*|[Mm]\d*(?:\[\d*[A-Za-z]+\])?)\Z"
)
# 'O' with any byte order or size; 'T' is numpy 2's StringDType (hasobject too).
_OBJECT = re.compile(r"[<>=|]?[OT]\d*\Z")
_OBJECT_NAMES = frozenset({"object", "object_", "object0", "O", "T", "StringDType"})
_INT_NAMES = [f"{p}int{n}" for p in ("", "u") for n in (8, 16, 32, 64)]
_PLAIN_NAMES = frozenset(
    _INT_NAMES
    + [f"float{n}" for n in (16, 32, 64, 96, 128)]
    + [f"complex{n}" for n in (64, 128, 192, 256)]
    + (
        "bool bool_ bool8 int uint float complex str str_ unicode unicode_ bytes bytes_ "
        "string_ void void0 datetime64 timedelta64 intp uintp byte ubyte short ushort intc "
        "uintc long ulong longlong ulonglong half single double longdouble longfloat csingle "
        "cdouble clongdouble clongfloat singlecomplex cfloat longcomplex float_ complex_ int_ "
        "uint0 int0 a S U V"
    ).split()
)
_DATETIME_NAME = re.compile(r"(?:datetime64|timedelta64)\[\d*[A-Za-z]+\]\Z")
_SHAPE_PREFIX = re.compile(r"\(\s*(?:\d+\s*(?:,\s*\d+\s*)*,?\s*)?\)|\d+")


class NpyError(ValueError):
    """The header is not one numpy would read (numpy.load raises too)."""


class UnknownDescr(ValueError):
    """A descr this reader cannot classify: it might hold objects."""


@dataclass(frozen=True)
class NpyHeader:
    version: int
    descr: Any
    shape: Any
    fortran_order: Any
    data_offset: int  # bytes from the magic to the first byte of the data


_STRING = re.compile(r"([<>|=]?)([SaU])(\d+)\Z")


def string_items(descr: Any) -> tuple[str, int] | None:
    """``(codec, itemsize)`` when ``descr`` is a plain array of strings, else None.

    ``S``/``a`` items are NUL-padded bytes; ``U`` items are UTF-32 in the
    descr's byte order.  Strings are text to scan: numpy reads them without
    ``allow_pickle``, so a secret in one ships as surely as in a text file.
    """
    if not isinstance(descr, str) or (match := _STRING.match(descr)) is None:
        return None
    order, kind, count = match.groups()
    if kind in "Sa":
        return "utf-8", int(count)
    big = order == ">" or (order in ("", "=", "|") and sys.byteorder == "big")
    return ("utf-32-be" if big else "utf-32-le"), 4 * int(count)


def holds_strings(descr: Any) -> bool:
    """A structured or nested descr with a string field anywhere (not read here)."""
    if isinstance(descr, str):
        return bool(re.search(r"[SaU]\d*\Z", descr)) or descr in ("str", "bytes", "unicode")
    if isinstance(descr, (list, tuple)):
        return any(holds_strings(part) for part in descr)
    return False


def read_header(fh: IO[bytes], max_header: int = MAX_HEADER) -> NpyHeader:
    """Read magic, version, length and the header dict; the stream is left at the data."""
    magic = fh.read(8)
    if len(magic) < 8 or not magic.startswith(MAGIC):
        raise NpyError("missing the \\x93NUMPY magic")
    major, minor = magic[6], magic[7]
    if major not in _LENGTH or minor != 0:
        raise NpyError(f"unknown npy version {major}.{minor}")
    size_fmt, encoding = _LENGTH[major]
    need = struct.calcsize(size_fmt)
    raw = fh.read(need)
    if len(raw) < need:
        raise NpyError("truncated npy header")
    (hlen,) = struct.unpack(size_fmt, raw)
    if hlen > max_header:
        raise UnknownDescr(f"npy header of {hlen} bytes is over the {max_header}-byte cap")
    header = fh.read(hlen)
    if len(header) < hlen:
        raise NpyError("truncated npy header")
    try:
        meta = ast.literal_eval(header.decode(encoding))  # literals only: never runs code
    except (UnicodeDecodeError, ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        # numpy retries 1.0/2.0 headers with Python 2 'L' suffixes filtered out; we
        # cannot tell what it would read, so this is unknown, not malformed.
        raise UnknownDescr("npy header is not a Python literal") from None
    if not isinstance(meta, dict):
        raise NpyError("npy header is not a dict")
    if meta.keys() != KEYS:
        raise NpyError(f"npy header keys are {sorted(map(repr, meta))}, not {sorted(KEYS)}")
    return NpyHeader(major, meta["descr"], meta["shape"], meta["fortran_order"], 8 + need + hlen)


def holds_objects(descr: Any, depth: int = 0) -> bool:
    """True when ``numpy.lib.format.descr_to_dtype(descr).hasobject`` would be.

    Raises ``UnknownDescr`` for anything not known to be plain.
    """
    if depth > MAX_DEPTH:
        raise UnknownDescr("dtype description nested too deep")
    if isinstance(descr, str):
        return _string_has_object(descr)
    if isinstance(descr, tuple):
        # (base, shape) is a sub-array; numpy.dtype((base, other)) also takes a
        # second dtype spec, so anything but a shape is judged as one.
        if len(descr) != 2:
            raise UnknownDescr(f"tuple descr of length {len(descr)}")
        base, second = descr
        return holds_objects(base, depth + 1) or (
            not _is_shape(second) and holds_objects(second, depth + 1)
        )
    if isinstance(descr, list):
        return any(_field_has_object(f, depth + 1) for f in descr)
    if isinstance(descr, dict):
        return _dict_has_object(descr, depth + 1)
    raise UnknownDescr(f"descr of type {type(descr).__name__}")


def _field_has_object(field: Any, depth: int) -> bool:
    if not isinstance(field, (tuple, list)) or len(field) not in (2, 3):
        raise UnknownDescr(f"structured field {field!r:.80} is not (name, descr[, shape])")
    return holds_objects(field[1], depth)


def _dict_has_object(descr: dict[Any, Any], depth: int) -> bool:
    if "formats" in descr:
        formats = descr["formats"]
        if not isinstance(formats, (list, tuple)):
            raise UnknownDescr("dict descr 'formats' is not a list")
        return any(holds_objects(f, depth) for f in formats)
    # the {'field': (dtype, offset[, title])} form
    found = False
    for value in descr.values():
        if not isinstance(value, tuple) or not value:
            raise UnknownDescr("dict descr field is not (dtype, offset)")
        found = holds_objects(value[0], depth) or found
    return found


def _is_shape(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, tuple) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    )


def _string_has_object(spec: str) -> bool:
    text = spec.strip()
    if "," in text:
        items = _split_commas(text)
        return any(_string_has_object(_strip_shape(item)) for item in items if item.strip())
    if _OBJECT.match(text) or text in _OBJECT_NAMES:
        return True
    if _PLAIN.match(text) or text in _PLAIN_NAMES or _DATETIME_NAME.match(text):
        return False
    raise UnknownDescr(f"dtype {spec!r:.80} is not a known numpy type string")


def _split_commas(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def _strip_shape(item: str) -> str:
    item = item.strip()
    m = _SHAPE_PREFIX.match(item)
    return item[m.end() :] if m else item
