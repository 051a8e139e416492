"""Canonical JSON (RFC 8785, JCS) and the manifest digest.

Layer: pure core - manifest (pure).  The canonical form is what gets hashed and signed,
so comments, key order and formatting of the file on disk never change it; any value
does.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

_MAX_SAFE_INT = 2**53 - 1


class CanonicalizationError(ValueError):
    """A value has no RFC 8785 representation (NaN, infinity, huge int...)."""


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` as RFC 8785 canonical JSON, UTF-8 encoded."""
    parts: list[str] = []
    _emit(value, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates cannot be UTF-8
        raise CanonicalizationError(f"string is not valid Unicode: {exc}") from None


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _emit(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, int):
        if abs(value) > _MAX_SAFE_INT:
            raise CanonicalizationError(
                f"integer {value} is outside the I-JSON range (|n| <= 2**53-1)"
            )
        out.append(str(value))
    elif isinstance(value, float):
        out.append(es_number(value))
    elif isinstance(value, dict):
        out.append("{")
        for n, k in enumerate(_key_order(tuple(value))):
            if n:
                out.append(",")
            out.append(_quote(k))
            out.append(":")
            _emit(value[k], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for n, item in enumerate(value):
            if n:
                out.append(",")
            _emit(item, out)
        out.append("]")
    else:
        raise CanonicalizationError(f"type {type(value).__name__} has no JSON form")


# What ``json.dumps(s, ensure_ascii=False)`` returns for a str, without making an
# encoder per value (a signed index of 100,000 files has 1.4 million of them).
_quote = json.encoder.encode_basestring
_ORDERS: dict[tuple[Any, ...], list[str]] = {}  # key order by key tuple: dicts repeat shapes


def _key_order(keys: tuple[Any, ...]) -> list[str]:
    """``keys`` sorted by their UTF-16 code units (RFC 8785 3.2.3)."""
    order = _ORDERS.get(keys)
    if order is None:
        for k in keys:
            if not isinstance(k, str):
                raise CanonicalizationError(f"object key {k!r} is not a string")
        order = sorted(keys, key=lambda s: s.encode("utf-16-be", "surrogatepass"))
        if len(_ORDERS) < 4096 and len(keys) <= 64:
            _ORDERS[keys] = order
    return order


def es_number(x: float) -> str:
    """ECMAScript Number::toString, as RFC 8785 section 3.2.2.3 requires."""
    if math.isnan(x) or math.isinf(x):
        raise CanonicalizationError(f"{x!r} is not a JSON number")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    all_digits = int_part + frac_part
    point = len(int_part) + int(exp_text or 0)
    stripped = all_digits.lstrip("0")
    point -= len(all_digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp = ("+" if e >= 0 else "-") + str(abs(e))
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + exp
    return sign + text
