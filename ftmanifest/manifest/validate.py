"""Check plain manifest data against the JSON Schema, with located problems.

Layer: pure core - manifest (pure).  The schema is generated from the pydantic model, so
the model stays the single source of truth; this small validator exists
because ``lint`` must answer in well under 100 ms and building the pydantic
models alone costs more than that.  A test runs valid and invalid manifests
(and Hypothesis-mutated ones) through both and requires the same verdict.

Supported keywords: the subset pydantic emits - $ref/$defs, type, const,
enum, pattern, min/maxLength, minimum/maximum/exclusive*, properties,
required, additionalProperties, propertyNames, items, min/maxItems, anyOf,
oneOf with a discriminator, allOf.
"""

from __future__ import annotations

import json
import operator
import re
from functools import lru_cache

from ftmanifest.findings import Finding
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest.load import Document
from ftmanifest.manifest.schema import packaged

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from typing import Any

RULE = "FTM000"

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
    "object": "a mapping",
    "array": "a list",
}


def _close(word: str, choices: list[str], n: int = 1, cutoff: float = 0.6) -> list[str]:
    import difflib  # only when there is something to suggest

    return difflib.get_close_matches(word, choices, n=n, cutoff=cutoff)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    actual = json_type(value)
    return actual == name or (name == "number" and actual == "integer")


def _same(a: Any, b: Any) -> bool:
    return json_type(a) == json_type(b) and a == b


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:79] + "…"


@lru_cache(maxsize=256)
def _pattern(text: str) -> re.Pattern[str]:
    # JSON Schema patterns are ECMA-262: a final "$" matches only at the very
    # end, while Python's also matches before a trailing newline.
    if text.endswith("$") and not text.endswith("\\$"):
        text = text[:-1] + r"\Z"
    return re.compile(text)


class _Problem:
    __slots__ = ("loc", "message", "expected", "observed", "hint")

    def __init__(
        self,
        loc: Loc,
        message: str,
        expected: str | None = None,
        observed: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.loc, self.message = loc, message
        self.expected, self.observed, self.hint = expected, observed, hint


class SchemaChecker:
    """Validate data against one root schema; collect every problem."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.root = schema
        self.defs: dict[str, Any] = schema.get("$defs", {})

    def problems(self, data: Any) -> list[_Problem]:
        out: list[_Problem] = []
        self._check(data, self.root, (), out)
        return out

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            ref = schema["$ref"]
            if not ref.startswith("#/$defs/"):
                raise ValueError(f"unsupported $ref {ref}")
            extra = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**self.defs[ref[len("#/$defs/") :]], **extra}
        return schema

    def _check(self, node: Any, schema: dict[str, Any], loc: Loc, out: list[_Problem]) -> None:
        schema = self._resolve(schema)
        for sub in schema.get("allOf", ()):
            self._check(node, sub, loc, out)
        if "oneOf" in schema or ("anyOf" in schema and "properties" not in schema):
            self._check_union(node, schema, loc, out)
            return
        if "type" in schema and not _is_type(node, schema["type"]):
            out.append(
                _Problem(
                    loc,
                    "wrong type",
                    expected=_TYPE_NAMES.get(schema["type"], schema["type"]),
                    observed=f"{_TYPE_NAMES.get(json_type(node), json_type(node))} {_show(node)}",
                )
            )
            return
        if "const" in schema and not _same(node, schema["const"]):
            out.append(_Problem(loc, "wrong value", _show(schema["const"]), _show(node)))
            return
        if "enum" in schema and not any(_same(node, e) for e in schema["enum"]):
            choices = ", ".join(_show(e) for e in schema["enum"])
            close = _close(str(node), [str(e) for e in schema["enum"]], n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"use one of {choices}"
            out.append(_Problem(loc, "value not allowed", f"one of {choices}", _show(node), hint))
            return
        if isinstance(node, str):
            self._check_string(node, schema, loc, out)
        elif _is_type(node, "number"):
            self._check_number(node, schema, loc, out)
        elif isinstance(node, dict):
            self._check_object(node, schema, loc, out)
        elif isinstance(node, list):
            self._check_array(node, schema, loc, out)

    def _check_union(
        self, node: Any, schema: dict[str, Any], loc: Loc, out: list[_Problem]
    ) -> None:
        branches = [self._resolve(b) for b in schema.get("oneOf", schema.get("anyOf", []))]
        disc = schema.get("discriminator")
        if disc and isinstance(node, dict):
            prop = disc["propertyName"]
            mapping = disc.get("mapping", {})
            tag = node.get(prop)
            if tag is None:
                out.append(_Problem((*loc, prop), "missing field", f"one of {sorted(mapping)}"))
                return
            if not isinstance(tag, str) or tag not in mapping:
                close = _close(str(tag), list(mapping), n=1)
                out.append(
                    _Problem(
                        (*loc, prop),
                        "unknown kind",
                        f"one of {', '.join(sorted(mapping))}",
                        _show(tag),
                        f"did you mean {close[0]!r}?" if close else None,
                    )
                )
                return
            self._check(node, {"$ref": mapping[tag]}, loc, out)
            return
        if all(set(b) <= {"required", "properties"} for b in branches):
            # "one of these fields is required" (e.g. model.repo or model.path)
            if not any(not self.problems_of(node, b, loc) for b in branches):
                names = [n for b in branches for n in b.get("required", [])]
                out.append(
                    _Problem(
                        loc,
                        f"needs one of: {', '.join(names)}",
                        expected=" or ".join(names),
                        observed="neither",
                    )
                )
            return
        matching = [b for b in branches if "type" not in b or _is_type(node, b["type"])]
        for b in matching:
            if not self.problems_of(node, b, loc):
                return
        if len(matching) == 1:
            self._check(node, matching[0], loc, out)
            return
        names = sorted({_TYPE_NAMES.get(b.get("type", ""), b.get("type", "?")) for b in branches})
        observed = f"{_TYPE_NAMES.get(json_type(node), json_type(node))} {_show(node)}"
        if matching:
            inner = self.problems_of(node, matching[0], loc)
            out.extend(inner)
            return
        out.append(_Problem(loc, "wrong type", " or ".join(names), observed))

    def problems_of(self, node: Any, schema: dict[str, Any], loc: Loc) -> list[_Problem]:
        sub: list[_Problem] = []
        self._check(node, schema, loc, sub)
        return sub

    def _check_string(
        self, node: str, schema: dict[str, Any], loc: Loc, out: list[_Problem]
    ) -> None:
        if "minLength" in schema and len(node) < schema["minLength"]:
            out.append(
                _Problem(
                    loc,
                    "string too short",
                    f"at least {schema['minLength']} characters",
                    _show(node),
                )
            )
        if "maxLength" in schema and len(node) > schema["maxLength"]:
            out.append(
                _Problem(
                    loc, "string too long", f"at most {schema['maxLength']} characters", _show(node)
                )
            )
        if "pattern" in schema and not _pattern(schema["pattern"]).search(node):
            expected = schema.get("description") or f"text matching {schema['pattern']}"
            out.append(_Problem(loc, "badly formed value", expected, _show(node)))

    def _check_number(
        self, node: float, schema: dict[str, Any], loc: Loc, out: list[_Problem]
    ) -> None:
        limits = (
            ("minimum", operator.ge, ">="),
            ("maximum", operator.le, "<="),
            ("exclusiveMinimum", operator.gt, ">"),
            ("exclusiveMaximum", operator.lt, "<"),
        )
        for key, ok, sign in limits:
            if key in schema and not ok(node, schema[key]):
                out.append(
                    _Problem(loc, "number out of range", f"{sign} {schema[key]}", _show(node))
                )

    def _check_object(
        self, node: dict[str, Any], schema: dict[str, Any], loc: Loc, out: list[_Problem]
    ) -> None:
        props: dict[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in node:
                out.append(
                    _Problem(
                        (*loc, name),
                        "missing required field",
                        expected=f"a value for '{name}'",
                        observed="absent",
                        hint=f"add '{name}:'",
                    )
                )
        names_schema = schema.get("propertyNames")
        extra = schema.get("additionalProperties", True)
        for key, value in node.items():
            if names_schema is not None:
                self._check(key, names_schema, (*loc, key), out)
            if key in props:
                self._check(value, props[key], (*loc, key), out)
            elif extra is False:
                close = _close(key, list(props), n=1, cutoff=0.6)
                hint = (
                    f"did you mean '{close[0]}'?"
                    if close
                    else f"allowed here: {', '.join(sorted(props))}"
                )
                out.append(_Problem((*loc, key), f"unknown field '{key}'", hint=hint))
            elif isinstance(extra, dict):
                self._check(value, extra, (*loc, key), out)
        if "anyOf" in schema:
            self._check_union(node, {"anyOf": schema["anyOf"]}, loc, out)

    def _check_array(
        self, node: list[Any], schema: dict[str, Any], loc: Loc, out: list[_Problem]
    ) -> None:
        if "minItems" in schema and len(node) < schema["minItems"]:
            out.append(
                _Problem(
                    loc,
                    "list too short",
                    f"at least {schema['minItems']} items",
                    f"{len(node)} items",
                )
            )
        if "maxItems" in schema and len(node) > schema["maxItems"]:
            out.append(
                _Problem(
                    loc,
                    "list too long",
                    f"at most {schema['maxItems']} items",
                    f"{len(node)} items",
                )
            )
        items = schema.get("items")
        if isinstance(items, dict):
            for i, value in enumerate(node):
                self._check(value, items, (*loc, i), out)


def schema_findings(doc: Document, schema: dict[str, Any] | None = None) -> list[Finding]:
    """Every schema problem of ``doc`` as a located ``Finding`` (kind ``schema``)."""
    if schema is None:
        schema = packaged()
    return [_finding(doc, p) for p in SchemaChecker(schema).problems(doc.data)]


def _finding(doc: Document, p: _Problem) -> Finding:
    line, col = doc.position(p.loc)
    field = format_loc(p.loc) or "(document)"
    message = p.message
    return Finding(
        kind="schema",
        rule=RULE,
        message=message,
        path=str(doc.path),
        line=line,
        column=col,
        field=field,
        loc=p.loc,
        expected=p.expected,
        observed=p.observed,
        hint=p.hint,
    )
