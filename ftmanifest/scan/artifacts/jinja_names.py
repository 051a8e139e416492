"""Routes to a dunder attribute in a Jinja template that no constant name shows.

Layer: judging rooms - pure core scanner rules (a parsed template in, reasons out);
jinja2 is imported by the caller (``gguf_model.judge_template``).  A renderer outside a
sandbox reaches ``__globals__`` (and so ``os``) not only through ``x.__init__`` but
through:

- a format string: ``'{0.__init__.__globals__[os].environ[X]}'.format(x)``
  (``str.format``/``format_map`` read attributes and items named in a field);
  any constant with a field that reads an attribute or item (``{0.a}``,
  ``{0[a]}``) is an error, and so is ``.format``/``.format_map`` called on a
  string the template builds;
- a name built at run time: ``'_'*2 ~ 'init' ~ '_'*2``, ``'%c%c'|format(95, 95)``,
  ``['_', '_']|join``, through ``{% set %}`` too.  Every expression is folded
  with Jinja's own ``as_const`` (names set to constants substituted); one that
  folds to a string holding ``__`` is an error, and a key or ``|attr`` name
  that is built (concatenated, repeated, formatted, filtered, called) but
  cannot be folded is an error too.

Benign chat templates (Llama 3, Qwen2, Mistral, Gemma) index with constants,
loop variables and arithmetic, and never build such names.
"""

from __future__ import annotations

import copy
import re
import string
from collections.abc import Iterator
from typing import Any

_FIELD_READS = re.compile(r"[.\[]")
_STRING_FILTERS = frozenset("format join replace string lower upper title capitalize reverse "
                            "trim center indent first last random".split())  # fmt: skip


def built_strings(tree: Any) -> BuiltStrings:
    return BuiltStrings(tree)


class BuiltStrings:
    """What one template builds: names set to constants, names set to built strings."""

    def __init__(self, tree: Any) -> None:
        from jinja2 import Environment, nodes
        from jinja2.nodes import EvalContext

        self.nodes = nodes
        self.ctx = EvalContext(Environment())
        self.consts: dict[str, Any] = {}
        self.built: set[str] = set()
        for _ in range(3):  # a name set from a name set earlier
            for assign in tree.find_all((nodes.Assign, nodes.For)):
                self._bind(assign)

    def _bind(self, node: Any) -> None:
        n = self.nodes
        target, value = node.target, node.node if isinstance(node, n.Assign) else node.iter
        if not isinstance(target, n.Name):
            return
        if isinstance(node, n.For):  # {% for u in ['_'] %}: each item may be the name
            items = value.items if isinstance(value, (n.List, n.Tuple)) else []
            folded = [self.fold(i) for i in items]
            if any(isinstance(f, str) and "_" in f for f in folded) or self.builds(value):
                self.built.add(target.name)
            return
        folded = self.fold(value)
        if isinstance(folded, (str, dict, list, tuple)):  # a name kept in a container too
            self.consts.setdefault(target.name, folded)
        if self.builds(value):
            self.built.add(target.name)

    def fold(self, node: Any) -> Any:
        """The node's value when it is a constant (names set to constants substituted)."""
        n = self.nodes
        if isinstance(node, n.Const):
            return node.value
        try:
            node = copy.deepcopy(node)
            for name in list(node.find_all(n.Name)):
                if name.ctx == "load" and name.name in self.consts:
                    _replace(node, name, n.Const(self.consts[name.name]))
            if isinstance(node, n.Name) and node.name in self.consts:
                return self.consts[node.name]
            return node.as_const(self.ctx)
        except Exception:  # noqa: BLE001 - Impossible, or the filter itself raises
            return None

    def builds(self, node: Any) -> bool:
        """Whether the expression builds a string: concatenates, repeats, formats, calls."""
        n = self.nodes
        for sub in [node, *node.find_all(n.Expr)]:
            if isinstance(sub, (n.Concat, n.Call, n.Mod)):
                return True
            if isinstance(sub, n.Filter) and sub.name in _STRING_FILTERS:
                return True
            if isinstance(sub, (n.Mul, n.Add)) and any(
                isinstance(side, n.Const) and isinstance(side.value, str)
                for side in (sub.left, sub.right)
            ):  # fmt: skip
                return True
            if isinstance(sub, n.Name) and sub.name in self.built:
                return True
        return False

    def reaches(self, node: Any) -> Iterator[str]:
        """Why ``node`` is a route to a dunder attribute (nothing when it is none)."""
        n = self.nodes
        if isinstance(node, n.Const) and isinstance(node.value, str):
            field = _reading_field(node.value)
            if field is not None:
                yield f"a format string field {field!r} reads attributes or items"
            return
        if isinstance(node, n.Call) and isinstance(node.node, n.Getattr):
            if node.node.attr in ("format", "format_map"):
                if not isinstance(node.node.node, n.Const):
                    yield f"it calls .{node.node.attr}() on a string built at run time"
        if isinstance(node, (n.Concat, n.Mul, n.Mod, n.Add, n.Filter, n.Call)):
            folded = self.fold(node)
            if isinstance(folded, str) and "__" in folded:
                yield f"it builds the string {folded[:40]!r} at run time"
        key, attribute = None, False
        if isinstance(node, n.Getitem):
            key = node.arg
        elif isinstance(node, n.Filter):
            key, attribute = _attribute_argument(node, n), True
        if key is not None and not isinstance(key, n.Const):
            folded = self.fold(key)
            if isinstance(folded, str) and folded.startswith("_"):
                yield f"it reaches {folded!r}, a name built at run time"
            elif folded is None and attribute:
                yield "it reads an attribute whose name is not written in the template"
            elif folded is None and self.builds(key):
                yield "it reads an attribute or item whose name is built at run time"


_NAME_FIRST = frozenset({"attr", "selectattr", "rejectattr", "groupby"})


def _attribute_argument(node: Any, n: Any) -> Any:
    """The argument naming the attribute a filter reads: ``|attr(x)``, ``selectattr(x)``,
    ``groupby(x)``, ``map('attr', x)``, ``attribute=x``; None when it reads none.  Real
    chat templates write it as a constant; one taken from the rendered messages hands
    the user the attribute."""
    kw = next((k.value for k in node.kwargs if k.key == "attribute"), None)
    if kw is not None:
        return kw
    if node.name in _NAME_FIRST and node.args:
        return node.args[0]
    first = node.args[0] if node.args else None
    if node.name == "map" and isinstance(first, n.Const) and first.value == "attr":
        return node.args[1] if len(node.args) > 1 else None
    return None


def _reading_field(text: str) -> str | None:
    """The first ``str.format`` field of ``text`` that reads an attribute or item."""
    if "{" not in text:
        return None
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return None  # str.format raises on it too
    for _literal, name, spec, _conv in parsed:
        for part in (name, spec):
            if part and _FIELD_READS.search(part.split("!")[0]):
                return part[:60]
            if part and "{" in part and _reading_field(part) is not None:
                return part[:60]
    return None


def _replace(root: Any, old: Any, new: Any) -> None:
    """Put ``new`` where ``old`` is among ``root``'s children (Jinja nodes are mutable)."""
    for parent in [root, *root.find_all(type(root).__mro__[-2])]:
        for field in parent.fields:
            value = getattr(parent, field, None)
            if value is old:
                setattr(parent, field, new)
            elif isinstance(value, list):
                setattr(parent, field, [new if v is old else v for v in value])
