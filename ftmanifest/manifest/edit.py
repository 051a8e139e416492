"""Edit a manifest's text in place: set values at field locations, keep everything else.

Layer: pure core - manifest (text in, text out; no I/O).  YAML is edited through
ruamel.yaml's round-trip tree, so comments, key order and quoting survive; JSON is
rewritten with two-space indentation.  ``lock`` is the first user; any command that
writes a manifest field goes through here.
"""

from __future__ import annotations

import io
import json
from typing import Any

from ftmanifest.location import Loc

__all__ = ["Loc", "apply_json", "apply_yaml"]


def apply_json(text: str, ups: list[tuple[Loc, Any]]) -> str:
    data = json.loads(text)
    for path, value in ups:
        _set(data, path, value, dict)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def apply_yaml(text: str, ups: list[tuple[Loc, Any]]) -> str:
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    mapping_indent, offset = _guess_indent(text)
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=mapping_indent, sequence=mapping_indent + offset, offset=offset)
    # keep `null` written out: ruamel's round trip would turn `parent: null` into `parent:`
    yaml.representer.add_representer(
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    tree = yaml.load(text)
    for path, value in ups:
        if path == ("model", "files"):
            seq = CommentedSeq()
            for item in value:
                entry = CommentedMap(item)
                entry.fa.set_flow_style()
                seq.append(entry)
            value = seq
        _set(tree, path, value, CommentedMap)
    out = io.StringIO()
    yaml.dump(tree, out)
    return out.getvalue()


def _guess_indent(text: str) -> tuple[int, int]:
    """(mapping indent, offset of '-' under its parent key) as the file uses them."""
    import re

    mapping, offset = 0, None
    previous_key_indent = None
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(stripped)
        if stripped.startswith("- ") and previous_key_indent is not None and offset is None:
            offset = max(0, depth - previous_key_indent)
        elif re.match(r"[^\s#-][^:]*:\s*(#.*)?$", stripped):
            previous_key_indent = depth
        if depth and not mapping and not stripped.startswith("- "):
            mapping = depth
    return mapping or 2, 2 if offset is None else offset


def _split_trailing(node: Any, key: Any) -> Any:
    """Detach what follows ``key``'s own line (blank lines, full-line comments)."""
    from ruamel.yaml.tokens import CommentToken

    items = node.ca.items.get(key)
    token = items[2] if items and len(items) > 2 else None
    if not isinstance(token, CommentToken):
        return None
    text = token.value
    if text.startswith("#"):  # an inline comment stays on its key's line
        head, newline, rest = text.partition("\n")
        if not rest:
            return None
        token.value = head + newline
        rest = newline + rest  # a token's text starts with the end of its own line
    else:
        rest = text
        items[2] = None
    from ruamel.yaml.error import CommentMark

    return CommentToken(rest, CommentMark(0), None)


FILL_MARK = "# FILL"


def _drop_fill(node: Any, key: Any) -> None:
    """Drop the template's ``# FILL…`` comment from the line of a key lock just
    filled; any blank lines or comments after that line stay."""
    ca = getattr(node, "ca", None)
    items: Any = ca.items.get(key) if ca is not None else None
    token = items[2] if items and len(items) > 2 else None
    if token is None or not str(token.value).startswith(FILL_MARK):
        return
    _, newline, rest = token.value.partition("\n")
    if rest:
        token.value = newline + rest  # a token's text starts with the end of its own line
    else:
        items[2] = None


def _set(node: Any, path: Loc, value: Any, mapping: Any) -> None:
    for key in path[:-1]:
        if isinstance(key, int):
            node = node[key]
            continue
        if key not in node or node[key] is None:
            node[key] = mapping()
        node = node[key]
    last = path[-1]
    if isinstance(node, dict) and isinstance(value, dict) and isinstance(node.get(last), dict):
        existing = node[last]
        for k in [k for k in existing if k not in value]:
            del existing[k]
        for k, v in value.items():
            existing[k] = v
            _drop_fill(existing, k)
        _drop_fill(node, last)
    elif last not in node and hasattr(node, "ca") and len(node) and not isinstance(value, dict):
        # ruamel keeps a section's trailing blank line/comment on its last key;
        # move it to the key appended after it, so it still ends the section.
        trailing = _split_trailing(node, list(node)[-1])
        node[last] = value
        if trailing is not None:
            node.ca.items[last] = [None, None, trailing, None]
    else:
        node[last] = value
        _drop_fill(node, last)
