"""A manifest as commented YAML text.

Layer: edges - authoring (text only, no I/O).  Mappings are written in block style,
lists of scalars in flow style, each value on its own line so its comment
(where it came from, or ``FILL: what to decide``) sits beside it.  Strings
that YAML would read as something else are written as JSON strings, which
YAML reads back unchanged; floats always carry a dot, so YAML 1.1 readers
read them as numbers too.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ftmanifest.location import Loc

COMMENT_COLUMN = 30
_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./@+-]*$")
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        mantissa, e, exp = text.partition("e")
        if e and "." not in mantissa:
            text = f"{mantissa}.0e{exp}"
        return text
    if isinstance(value, str):
        if _PLAIN.match(value) and value.lower() not in _YAML_WORDS:
            return value
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{scalar(str(k))}: {scalar(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


def _line(text: str, comment: str | None) -> str:
    if not comment:
        return text
    one = " ".join(comment.split())
    return f"{text.ljust(COMMENT_COLUMN - 2)}  # {one}"


def emit(
    node: dict[str, Any], comments: dict[Loc, str], loc: Loc = (), indent: int = 0
) -> list[str]:
    """The lines of ``node``; ``comments`` by location."""
    out: list[str] = []
    pad = " " * indent
    for key, value in node.items():
        here = (*loc, key)
        comment = comments.get(here)
        if isinstance(value, dict) and value and not _flow(here):
            out.append(_line(f"{pad}{key}:", comment))
            out += emit(value, comments, here, indent + 2)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            out.append(_line(f"{pad}{key}:", comment))
            for i, item in enumerate(value):
                for n, (k, v) in enumerate(item.items()):
                    lead = f"{pad}  - " if n == 0 else f"{pad}    "
                    out.append(_line(f"{lead}{k}: {scalar(v)}", comments.get((*here, i, k))))
        else:
            out.append(_line(f"{pad}{key}: {scalar(value)}", comment))
    return out


def _flow(loc: Loc) -> bool:
    """Mappings written on one line: pattern tables and free-form configs."""
    return bool(loc) and loc[-1] in ("rank_pattern", "alpha_pattern", "params", "config")
