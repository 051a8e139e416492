"""A YAML manifest's text into plain data, with the line and column of every key.

Layer: pure core - manifest (pure; no runtime ``typing``, it is on the lint path).  YAML
is composed to nodes (libyaml through PyYAML's C loader when present) with no implicit
typing and constructed here by the YAML 1.2 core schema, so there is one place that
decides what a value is.  Refused with a location: syntax errors (pointed at where the
construct began, a tab in the indentation named as such), tags, merge keys, non-string
and duplicate keys, alias expansion beyond ``MAX_NODES``, nesting deeper than
``MAX_DEPTH``, integers out of exact range, NaN and infinity.
"""

from __future__ import annotations

import math
import re

from ftmanifest.errors import ManifestError
from ftmanifest.location import format_loc
from ftmanifest.manifest.limits import MAX_DEPTH, MAX_NODES, not_finite, safe_int

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from typing import Any

    from ftmanifest.location import Loc


def parse_yaml(text: str, name: str) -> tuple[Any, dict[Loc, tuple[int, int]]]:
    """Compose YAML nodes with libyaml (PyYAML's C loader when present) with no
    implicit typing, then resolve plain scalars by the YAML 1.2 core schema
    here: one place decides what a value is, every key keeps its mark,
    duplicate keys and tags are refused, and alias expansion is counted."""
    import yaml

    loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        raise _yaml_syntax_error(exc, text, name) from None
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        raise ManifestError(f"YAML syntax: {_one_line(exc)}", path=name) from None
    positions: dict[Loc, tuple[int, int]] = {}
    data = None if root is None else _node(root, (), positions, name, [0])
    return data, positions


def _yaml_syntax_error(exc: Any, text: str, name: str) -> ManifestError:
    """Point where the problem started, not where the parser gave up.

    PyYAML's ``problem_mark`` is where it noticed (for an unclosed quote or
    bracket, often the end of the file); its ``context_mark``, when present,
    is where the construct it was reading began, which is where to look.  A
    tab in the indentation is named as such: YAML indents with spaces only.
    """
    problem, context = exc.problem or "invalid YAML", exc.context
    where, at = exc.problem_mark, exc.context_mark
    tab_line = _tab_indent_line(text, where.line if where else None, "tab" in problem)
    if tab_line is not None:
        return ManifestError(
            "YAML syntax: a tab in the indentation (YAML indents with spaces only)",
            path=name,
            line=tab_line + 1,
            column=1,
            observed="a tab character",
            expected="spaces",
            hint="replace the tab(s) at the start of that line with spaces",
        )
    if at is not None and context and (where is None or at.line != where.line):
        found = f"line {where.line + 1}, column {where.column + 1}" if where else "the end"
        return ManifestError(
            f"YAML syntax: {problem} at {found}, {context} that starts here",
            path=name,
            line=at.line + 1,
            column=at.column + 1,
            hint="close or fix what starts at this place",
        )
    mark = where or at
    message = f"YAML syntax: {problem}" + (f" ({context})" if context and where else "")
    return ManifestError(
        message,
        path=name,
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
        hint="fix the YAML at that place",
    )


def _tab_indent_line(text: str, near: int | None, said_tab: bool) -> int | None:
    """The 0-based line the parser stopped on (or the first before it) that is
    indented with a tab, if that is what stopped it."""
    if near is None:
        return None
    lines = text.split("\n")
    for index in (near, near - 1) if said_tab else (near,):
        if (
            0 <= index < len(lines)
            and "\t" in lines[index][: len(lines[index]) - len(lines[index].lstrip(" \t"))]
        ):
            return index
    return None


_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
# Without implicit typing every untagged node carries its kind's default tag.
_DEFAULT_TAG = {"scalar": _STR_TAG, "mapping": _MAP_TAG, "sequence": _SEQ_TAG}
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_RE = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_SPECIAL_FLOAT_RE = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
# Without implicit typing every untagged node carries its kind's default tag.
_DEFAULT_TAG = {"scalar": _STR_TAG, "mapping": _MAP_TAG, "sequence": _SEQ_TAG}
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_RE = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_SPECIAL_FLOAT_RE = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


def _mark(node: Any) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _node(node: Any, loc: Loc, pos: dict[Loc, tuple[int, int]], name: str, count: list[int]) -> Any:
    """Plain data from a composed node.  The counter bounds alias expansion:
    a "billion laughs" document is small on disk and shared in memory, but
    walking it visits every repetition."""
    count[0] += 1
    if count[0] > MAX_NODES:
        raise ManifestError(
            "document expands to too many values (alias/anchor bomb?)",
            path=name,
            expected=f"at most {MAX_NODES} values",
            hint="remove the anchors/aliases that repeat large blocks",
        )
    line, col = _mark(node)
    if len(loc) > MAX_DEPTH:
        raise ManifestError(
            f"nesting deeper than {MAX_DEPTH} levels", path=name, line=line, column=col
        )
    kind = node.id
    if node.tag != _DEFAULT_TAG[kind]:
        raise ManifestError(
            f"YAML tags are not supported ({node.tag})",
            path=name,
            line=line,
            column=col,
            field=format_loc(loc) or None,
            hint="remove the tag; write a plain value",
        )
    if kind == "mapping":
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            kl = _mark(key_node)
            if key_node.id == "scalar" and key_node.value == "<<" and not key_node.style:
                raise ManifestError(
                    "merge keys (<<) are not supported",
                    path=name,
                    line=kl[0],
                    column=kl[1],
                    hint="write the keys out",
                )
            key = _node(key_node, loc, {}, name, count)
            if not isinstance(key, str):
                raise ManifestError(
                    f"mapping key {key!r} is not a string",
                    path=name,
                    line=kl[0],
                    column=kl[1],
                    hint="quote the key",
                )
            child = (*loc, key)
            if key in out:
                first = pos.get(child, (None, None))
                raise ManifestError(
                    f"duplicate key '{key}' (first at line {first[0]})",
                    path=name,
                    line=kl[0],
                    column=kl[1],
                    field=format_loc(child),
                    hint="keep one",
                )
            pos[child] = kl
            out[key] = _node(value_node, child, pos, name, count)
        return out
    if kind == "sequence":
        items = []
        for i, item in enumerate(node.value):
            child = (*loc, i)
            pos[child] = _mark(item)
            items.append(_node(item, child, pos, name, count))
        return items
    return _yaml_scalar(node, loc, name)


def _yaml_scalar(node: Any, loc: Loc, name: str) -> Any:
    """YAML 1.2 core schema resolution of one scalar (quoted means string)."""
    value: str = node.value
    line, col = _mark(node)
    if node.style:  # quoted or block scalar ('' or None means plain)
        return value
    if _NULL_RE.match(value):
        return None
    if _BOOL_RE.match(value):
        return value.lower() == "true"
    if _INT_RE.match(value):
        number = int(value, 0) if value[:2] in ("0o", "0x") else int(value, 10)
        return safe_int(number, loc, name, line, col)
    if _FLOAT_RE.match(value):
        real = float(value)
        if math.isinf(real):
            raise not_finite(
                "number is too large: it would be infinity", value, loc, name, line, col
            )
        return real
    if _SPECIAL_FLOAT_RE.match(value):
        raise not_finite("NaN and infinity are not allowed", value, loc, name, line, col)
    return value


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
