"""Read a manifest file (YAML, JSON or TOML) into plain data with positions.

Layer: pure core - manifest (reads one file, judges nothing beyond syntax).  The result
keeps the line and column of every key so that later checks can name the
exact place of a problem.  YAML is composed to nodes (libyaml through
ruamel.yaml.clib when present, YAML 1.2 resolution) and constructed here, so
there is one place that decides what a value is.

Refused here, each with a location: files over ``MAX_BYTES``, non-UTF-8
bytes, syntax errors, duplicate keys, alias expansion beyond ``MAX_NODES``,
nesting deeper than ``MAX_DEPTH``, non-string keys, NaN/infinity.
"""

from __future__ import annotations

import json
import math
import os
import re

from ftmanifest.errors import InputNotFoundError, ManifestError
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest.jsonkeys import unique_keys

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

MAX_BYTES = 16 << 20  # a model of ~25,000 listed files; MAX_NODES binds first
MAX_NODES = 100_000
MAX_DEPTH = 64
MAX_SAFE_INT = 2**53 - 1

_SUFFIX_FORMAT = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml"}


class Document:
    """A parsed manifest file: plain data plus where each key stands."""

    __slots__ = ("path", "format", "text", "data", "positions")

    def __init__(
        self,
        path: str,
        format: str,
        text: str,
        data: Any,
        positions: dict[Loc, tuple[int, int]] | None = None,
    ) -> None:
        self.path = path
        self.format = format
        self.text = text
        self.data = data
        self.positions = positions if positions is not None else {}

    def position(self, loc: Loc) -> tuple[int | None, int | None]:
        """1-based (line, column) of ``loc`` or of its nearest located parent."""
        probe = tuple(loc)
        while probe:
            if probe in self.positions:
                return self.positions[probe]
            probe = probe[:-1]
        return (1, 1) if self.text else (None, None)


def detect_format(path: str) -> str:
    return _SUFFIX_FORMAT.get(os.path.splitext(path)[1].lower(), "yaml")


def read_document(path: str | Path) -> Document:
    """Read and parse ``path``; raise ``ManifestError`` with a location on failure."""
    name = os.fspath(path)
    try:
        raw = _read_regular(name)
    except FileNotFoundError:
        raise InputNotFoundError(
            "manifest not found",
            path=name,
            hint="check the path, or create one with `ftmanifest init`",
        ) from None
    except IsADirectoryError:
        raise ManifestError(
            "is a directory, not a manifest file",
            path=name,
            expected="a manifest file (.yaml, .yml, .json or .toml)",
            hint=f"name the manifest file(s) in it, e.g. {os.path.join(name, '*.yaml')}",
        ) from None
    except _NotRegular as exc:
        raise ManifestError(
            f"is {exc.kind}, not a regular file",
            path=name,
            expected="a manifest file",
            hint="save the manifest to a file and name that file",
        ) from None
    except OSError as exc:
        raise ManifestError(
            f"cannot read the file: {exc.strerror or exc}",
            path=name,
            hint="check the path and its permissions",
        ) from None
    if len(raw) > MAX_BYTES:
        raise ManifestError(
            "file is too large for a manifest",
            path=name,
            expected=f"at most {MAX_BYTES} bytes",
            observed=f"more than {MAX_BYTES} bytes",
            hint="a manifest pins data by digest; it never embeds the data itself",
        )
    text = decode_utf8(raw, name)
    return parse_text(text, name, detect_format(name))


class _NotRegular(Exception):
    def __init__(self, kind: str) -> None:
        self.kind = kind


def _read_regular(name: str) -> bytes:
    """At most ``MAX_BYTES + 1`` bytes of a regular file.  Opened without
    blocking and checked before reading, so a FIFO or a device never hangs
    the command (a FIFO's open would wait for a writer)."""
    import stat

    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(name)
        if not stat.S_ISREG(mode):
            kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a device"}
            raise _NotRegular(next((k for test, k in kinds.items() if test(mode)), "a device"))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_BYTES + 1)
    finally:
        os.close(fd)


def decode_utf8(raw: bytes, name: str) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ManifestError(
            "file is not valid UTF-8",
            path=name,
            line=line,
            column=col,
            observed=f"byte 0x{raw[exc.start]:02x}",
            expected="UTF-8 text",
            hint="re-save the file as UTF-8",
        ) from None


def parse_text(text: str, name: str, fmt: str) -> Document:
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ManifestError("file contains a NUL character", path=name, line=line)
    if fmt == "json":
        return _parse_json(text, name)
    if fmt == "toml":
        return _parse_toml(text, name)
    return _parse_yaml(text, name)


# --- YAML -------------------------------------------------------------------


def _parse_yaml(text: str, name: str) -> Document:
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
    return Document(name, "yaml", text, data, positions)


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
        return _safe_int(number, loc, name, line, col)
    if _FLOAT_RE.match(value):
        real = float(value)
        if math.isinf(real):
            raise _not_finite(
                "number is too large: it would be infinity", value, loc, name, line, col
            )
        return real
    if _SPECIAL_FLOAT_RE.match(value):
        raise _not_finite("NaN and infinity are not allowed", value, loc, name, line, col)
    return value


def _not_finite(
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


def _safe_int(
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


# --- JSON -------------------------------------------------------------------


def _parse_json(text: str, name: str) -> Document:
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
        raise _not_finite(f"{exc.token} is not allowed", exc.token, (), name) from None
    except RecursionError:
        raise ManifestError(f"nesting deeper than {MAX_DEPTH} levels", path=name) from None
    _check_shape(data, (), name, [0])
    positions = _json_positions(text)
    return Document(name, "json", text, data, positions)


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


class _BadConstant(Exception):
    def __init__(self, token: str) -> None:
        self.token = token


def _check_shape(node: Any, loc: Loc, name: str, count: list[int]) -> None:
    count[0] += 1
    if count[0] > MAX_NODES or len(loc) > MAX_DEPTH:
        raise ManifestError("document is too large or too deeply nested", path=name)
    if isinstance(node, int) and not isinstance(node, bool):
        _safe_int(node, loc, name)
    if isinstance(node, float) and math.isinf(node):
        raise _not_finite("number is too large: it would be infinity", None, loc, name)
    if isinstance(node, dict):
        for k, v in node.items():
            _check_shape(v, (*loc, k), name, count)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _check_shape(v, (*loc, i), name, count)


def _json_positions(text: str) -> dict[Loc, tuple[int, int]]:
    """Positions of keys in valid JSON, read through ruamel (JSON is YAML 1.2)."""
    try:
        return _parse_yaml(text, "").positions
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


# --- TOML -------------------------------------------------------------------


def _parse_toml(text: str, name: str) -> Document:
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
    _check_shape(data, (), name, [0])
    return Document(name, "toml", text, data, _toml_positions(text, data))


def _toml_plain(node: Any, loc: Loc, name: str) -> Any:
    import datetime as _dt

    if isinstance(node, dict):
        return {k: _toml_plain(v, (*loc, k), name) for k, v in node.items()}
    if isinstance(node, list):
        return [_toml_plain(v, (*loc, i), name) for i, v in enumerate(node)]
    if isinstance(node, float) and (math.isnan(node) or math.isinf(node)):
        raise _not_finite(
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


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
