"""A JSON manifest's text into plain data, with the line and column of every key.

Layer: pure core - manifest (pure; no runtime ``typing``, it is on the lint path).  The
standard ``json`` parser reads the data, refusing duplicate keys and NaN/infinity; the
keys' positions are read through the YAML composer (JSON is YAML 1.2), a courtesy that
never decides what a value is.
"""

from __future__ import annotations

import json

from ftmanifest.errors import ManifestError
from ftmanifest.manifest.jsonkeys import unique_keys
from ftmanifest.manifest.limits import MAX_DEPTH, check_shape, not_finite
from ftmanifest.manifest.yaml_syntax import parse_yaml

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from typing import Any

    from ftmanifest.location import Loc


def parse_json(text: str, name: str) -> tuple[Any, dict[Loc, tuple[int, int]]]:
    def bad_constant(token: str) -> Any:
        raise _BadConstant(token)

    try:
        data = json.loads(
            text, object_pairs_hook=unique_keys(_Duplicate), parse_constant=bad_constant
        )
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"JSON syntax: {exc.msg}", path=name, line=exc.lineno, column=exc.colno
        ) from None
    except _Duplicate as exc:
        line, col = _find_key(text, exc.key, nth=2)
        raise ManifestError(
            f"duplicate key '{exc.key}'", path=name, line=line, column=col, hint="keep one"
        ) from None
    except _BadConstant as exc:
        raise not_finite(f"{exc.token} is not allowed", exc.token, (), name) from None
    except RecursionError:
        raise ManifestError(f"nesting deeper than {MAX_DEPTH} levels", path=name) from None
    check_shape(data, (), name, [0])
    positions = _json_positions(text)
    return data, positions


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


class _BadConstant(Exception):
    def __init__(self, token: str) -> None:
        self.token = token


def _json_positions(text: str) -> dict[Loc, tuple[int, int]]:
    """Positions of keys in valid JSON, read through ruamel (JSON is YAML 1.2)."""
    try:
        return parse_yaml(text, "")[1]
    except Exception:  # positions are a courtesy; the data came from json
        return {}


def _find_key(text: str, key: str, nth: int = 1) -> tuple[int | None, int | None]:
    needle = json.dumps(key)
    start = -1
    for _ in range(nth):
        start = text.find(needle, start + 1)
        if start < 0:
            return None, None
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1
