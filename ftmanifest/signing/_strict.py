"""Strict parsing helpers shared by the envelope and statement parsers.

Layer: signing (pure).  JSON with duplicate keys, NaN or Infinity is refused
(RFC 8259 leaves duplicates undefined, and two parsers may disagree about which
value wins: a classic signature-bypass), and base64 must be the one canonical
encoding of its bytes, so no two different texts carry the same value.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any

from ftmanifest.manifest.jsonkeys import unique_keys

_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


class StrictJSONError(ValueError):
    """The text is not strict JSON; the message says why."""


_pairs = unique_keys(lambda key: StrictJSONError(f"duplicate key {key!r}"))


def _constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError(f"number {text} overflows to {value}")
    return value


def loads_strict(data: bytes) -> Any:
    """Parse UTF-8 JSON, refusing duplicate keys, NaN, Infinity and overflow."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(
            text, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float
        )
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise StrictJSONError("nesting too deep") from None


def b64decode_strict(text: str) -> bytes:
    """Decode standard padded base64 that is the canonical encoding of its bytes."""
    if len(text) % 4 or not _B64.fullmatch(text):
        raise ValueError("not standard padded base64")
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not valid base64 ({exc})") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise ValueError("not the canonical base64 encoding (stray padding bits)")
    return raw


def b64encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")
