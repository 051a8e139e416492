"""What differs between two manifests, field by field.

Layer: pure core (data in, changes out).  Both sides are the validated
models dumped with their defaults, so formatting, comments, key order, the
file format (YAML, JSON, TOML) and a default written out explicitly make no
difference.  Lists of mappings whose items carry a unique ``name`` (data
entries, guards) or ``path`` (model files) are matched by it, so an entry
moved in the list is not a change; other lists compare position by position.

A field is written as people type it: ``method.r``, ``data[train].digest``,
``model.files[model.safetensors].digest``, ``environment.packages["zope.interface"]``
(a key with a dot or bracket is quoted), ``experiment.guards[0]`` for a
list without keys.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest

_KEYS = ("name", "path")
_ABSENT: Any = object()


@dataclass(frozen=True)
class Change:
    field: str
    kind: Literal["added", "removed", "changed"]
    old: Any = None  # None with "added"
    new: Any = None  # None with "removed"

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "kind": self.kind, "old": self.old, "new": self.new}


def shown_value(value: Any, *, absent: bool = False, width: int = 48) -> str:
    """One side of a change as people read it: ``(absent)``, ``(none)``, a string
    as it is, anything else as JSON; on one line, cut to ``width`` characters.
    Not escaped: the edge that prints it escapes it."""
    if absent:
        return "(absent)"
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def field_covers(prefix: str, field: str) -> bool:
    """``method`` covers ``method.r``; ``data[train]`` covers ``data[train].digest``."""
    return field == prefix or field.startswith((prefix + ".", prefix + "["))


def _key_text(key: str) -> str:
    if any(c in key for c in ".[]\"' ") or not key:
        return json.dumps(key)
    return key


def _join(prefix: str, key: str) -> str:
    text = _key_text(key)
    if text.startswith('"'):
        return f"{prefix}[{text}]"
    return f"{prefix}.{text}" if prefix else text


def _list_key(items: list[Any]) -> str | None:
    """The field that names each item of ``items`` uniquely, if one does."""
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in _KEYS:
        values = [i.get(key) for i in items]
        if all(isinstance(v, str) and v for v in values) and len(set(values)) == len(values):
            return key
    return None


def diff_values(old: Any, new: Any, prefix: str = "") -> list[Change]:
    """Every leaf that differs between ``old`` and ``new`` (JSON-like data)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[Change] = []
        for key in sorted(set(old) | set(new), key=str):
            here = _join(prefix, str(key))
            out += _pair(old.get(key, _ABSENT), new.get(key, _ABSENT), here)
        return out
    if isinstance(old, list) and isinstance(new, list):
        named_old, named_new = _list_key(old), _list_key(new)
        key = named_old if named_old == named_new else None
        if not old or not new:  # one side empty: the other's key, if any
            key = named_old or named_new
        if key is not None:
            before = {i[key]: i for i in old}
            after = {i[key]: i for i in new}
            out = []
            for name in sorted(set(before) | set(after)):
                here = f"{prefix}[{_key_text(name)}]"
                out += _pair(before.get(name, _ABSENT), after.get(name, _ABSENT), here)
            return out
        out = []
        for i in range(max(len(old), len(new))):
            a = old[i] if i < len(old) else _ABSENT
            b = new[i] if i < len(new) else _ABSENT
            out += _pair(a, b, f"{prefix}[{i}]")
        return out
    return [] if _same(old, new) else [Change(prefix, "changed", old, new)]


def _pair(a: Any, b: Any, here: str) -> list[Change]:
    if a is _ABSENT:
        return [Change(here, "added", None, b)]
    if b is _ABSENT:
        return [Change(here, "removed", a, None)]
    return diff_values(a, b, here)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: ``1 == 1.0`` but ``True != 1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(type(a) is type(b) and a == b) or (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
    )


def diff_manifests(old: Any, new: Any) -> list[Change]:
    """``old`` and ``new`` are ``LoadedManifest``s."""
    return diff_values(_dump(old), _dump(new))


def _dump(loaded: LoadedManifest) -> dict[str, Any]:
    data: dict[str, Any] = loaded.manifest.model_dump(mode="json")
    return data
