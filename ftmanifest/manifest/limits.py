"""What a manifest's values may be, whatever its syntax: how many, how deep, which numbers.

Layer: pure core - manifest (pure; no runtime ``typing``, it is on the lint path).  Each
syntax (``yaml_syntax``, ``json_syntax``, ``toml_syntax``) turns text into plain data;
the limits here are the ones all three share: at most ``MAX_NODES`` values (so an alias
bomb is refused however small on disk), nesting no deeper than ``MAX_DEPTH``, integers
within I-JSON's exact range and no NaN or infinity, the numbers the canonical form
(RFC 8785) can hold.
"""

from __future__ import annotations

import math

from ftmanifest.errors import ManifestError
from ftmanifest.location import format_loc

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from typing import Any

    from ftmanifest.location import Loc

MAX_NODES = 100_000
MAX_DEPTH = 64
MAX_SAFE_INT = 2**53 - 1


def not_finite(
    message: str,
    value: str | None,
    loc: Loc,
    name: str,
    line: int | None = None,
    col: int | None = None,
    *,
    field: str | None = None,
) -> ManifestError:
    """A number the canonical JSON form cannot hold (RFC 8785 refuses NaN and infinities)."""
    return ManifestError(
        message,
        path=name,
        line=line,
        column=col,
        field=field or format_loc(loc) or None,
        observed=value,
        expected="a finite number",
        hint="write a finite number, or quote it to make it a string",
    )


def safe_int(
    value: int, loc: Loc, name: str, line: int | None = None, col: int | None = None
) -> int:
    """Refuse an integer outside I-JSON's exact range (RFC 7493 2.2), which the
    canonical form (RFC 8785) cannot represent: here, with its field and place,
    rather than in ``digest``/``sign``/``verify`` later."""
    if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
        return value
    text = (
        str(value) if len(str(value)) <= 40 else f"{str(value)[:20]}... ({len(str(value))} digits)"
    )
    raise ManifestError(
        "integer is too large to be represented exactly",
        path=name,
        line=line,
        column=col,
        field=format_loc(loc) or None,
        expected=f"an integer between -{MAX_SAFE_INT} and {MAX_SAFE_INT} (2**53-1)",
        observed=text,
        hint="write a smaller number, or quote it to make it a string",
    )


def check_shape(node: Any, loc: Loc, name: str, count: list[int]) -> None:
    count[0] += 1
    if count[0] > MAX_NODES or len(loc) > MAX_DEPTH:
        raise ManifestError("document is too large or too deeply nested", path=name)
    if isinstance(node, int) and not isinstance(node, bool):
        safe_int(node, loc, name)
    if isinstance(node, float) and math.isinf(node):
        raise not_finite("number is too large: it would be infinity", None, loc, name)
    if isinstance(node, dict):
        for k, v in node.items():
            check_shape(v, (*loc, k), name, count)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            check_shape(v, (*loc, i), name, count)
