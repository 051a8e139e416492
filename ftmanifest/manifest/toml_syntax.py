"""A TOML manifest's text into plain data, with the line of every key it can find.

Layer: pure core - manifest (pure; no runtime ``typing``, it is on the lint path).  The
standard ``tomllib`` (``tomli`` on Python 3.10) reads the data; dates and times become
their ISO text, NaN and infinity are refused; the stdlib keeps no positions, so keys
are found again line by line (best effort).
"""

from __future__ import annotations

import math
import re

from ftmanifest.errors import ManifestError
from ftmanifest.location import format_loc
from ftmanifest.manifest.limits import check_shape, not_finite

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from typing import Any

    from ftmanifest.location import Loc


def parse_toml(text: str, name: str) -> tuple[Any, dict[Loc, tuple[int, int]]]:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line, col = (int(found.group(1)), int(found.group(2))) if found else (None, None)
        if line is None and "end of document" in str(exc):
            line = text.count("\n") + 1
            col = len(text) - (text.rfind("\n") + 1) + 1
        message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(exc))
        raise ManifestError(f"TOML syntax: {message}", path=name, line=line, column=col) from None
    data = _toml_plain(data, (), name)
    check_shape(data, (), name, [0])
    return data, _toml_positions(text, data)


def _toml_plain(node: Any, loc: Loc, name: str) -> Any:
    import datetime as _dt

    if isinstance(node, dict):
        return {k: _toml_plain(v, (*loc, k), name) for k, v in node.items()}
    if isinstance(node, list):
        return [_toml_plain(v, (*loc, i), name) for i, v in enumerate(node)]
    if isinstance(node, float) and (math.isnan(node) or math.isinf(node)):
        raise not_finite(
            "NaN and infinity are not allowed", str(node), loc, name, field=_dotted(loc)
        )
    if isinstance(node, (_dt.date, _dt.datetime, _dt.time)):
        return node.isoformat()
    return node


def _toml_positions(text: str, data: Any) -> dict[Loc, tuple[int, int]]:
    """Best-effort key positions: TOML parsers in the stdlib keep none.

    Tables (``[a.b]``) and ``key =`` lines are matched in order; keys inside
    arrays of tables get the position of their ``[[...]]`` header.
    """
    positions: dict[Loc, tuple[int, int]] = {}
    table: Loc = ()
    array_index: dict[Loc, int] = {}
    header = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
    assign = re.compile(r"^(\s*)([A-Za-z0-9_\-\"'.]+)\s*=")
    for lineno, line in enumerate(text.splitlines(), start=1):
        h = header.match(line)
        if h:
            parts: Loc = tuple(p.strip().strip("\"'") for p in h.group(2).split("."))
            if h.group(1) == "[[":
                idx = array_index.get(parts, -1) + 1
                array_index[parts] = idx
                positions.setdefault(parts, (lineno, 1))
                parts = (*parts, idx)
            table = parts
            positions.setdefault(table, (lineno, 1))
            continue
        a = assign.match(line)
        if a:
            keys = tuple(k.strip("\"'") for k in a.group(2).split("."))
            positions.setdefault((*table, *keys), (lineno, len(a.group(1)) + 1))
    return positions


def _dotted(loc: Loc) -> str:
    return format_loc(loc)
