"""The JSON Schema, generated from the pydantic model.

Layer: pure core - manifest.  ``generate()`` builds it from the model (slow: imports and
builds every pydantic model); ``packaged()`` reads the copy shipped inside the
package (fast: what ``lint`` uses).  ``make schema`` writes both the packaged
copy and ``schema/ftmanifest.schema.json`` (and the field reference in
docs/reference/manifest.md); a test fails when any of them is stale.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from typing import Any

SCHEMA_ID = "https://ftmanifest.dev/schema/v1/ftmanifest.schema.json"
PACKAGED_NAME = "ftmanifest.schema.json"


def generate() -> dict[str, Any]:
    from ftmanifest.manifest.model import Manifest  # lazy: pydantic; lint never builds the models

    body = Manifest.model_json_schema()
    head = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
    }
    return {**head, **body}


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


@lru_cache(maxsize=1)
def packaged() -> dict[str, Any]:
    with open(os.path.join(os.path.dirname(__file__), PACKAGED_NAME), encoding="utf-8") as fh:
        text = fh.read()
    schema: dict[str, Any] = json.loads(text)
    return schema


def markdown_reference(schema: dict[str, Any]) -> str:
    """A field table (path, type, description), from the schema: the body of
    docs/reference/manifest.md (``make docs``) and of ``ftmanifest schema --markdown``."""
    defs = schema.get("$defs", {})
    rows: list[tuple[str, str, str]] = []

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def type_name(node: dict[str, Any]) -> str:
        node = resolve(node)
        if "const" in node:
            return repr(node["const"]).replace("'", "")
        if "enum" in node:
            return " \\| ".join(str(e) for e in node["enum"])
        if "properties" in node:
            return "mapping"
        if "discriminator" in node:
            return "mapping, by kind: " + ", ".join(sorted(node["discriminator"]["mapping"]))
        if "anyOf" in node or "oneOf" in node:
            parts = [type_name(b) for b in node.get("anyOf", node.get("oneOf", []))]
            return " \\| ".join(p for p in parts if p != "null") + (
                " (optional)" if "null" in parts else ""
            )
        kind = node.get("type", "object")
        if kind == "array":
            return f"list of {type_name(node.get('items', {}))}"
        if kind == "object" and "properties" in node:
            return "mapping"
        extra = node.get("additionalProperties", {})
        if kind == "object" and isinstance(extra, dict) and extra:
            return "mapping of names to " + type_name(extra)
        if kind == "object":
            return "mapping"
        if "pattern" in node and node["pattern"].startswith("^sha256"):
            return "digest"
        return str(kind)

    def objects_of(node: dict[str, Any]) -> list[dict[str, Any]]:
        node = resolve(node)
        if "properties" in node:
            return [node]
        out = []
        for branch in node.get("anyOf", node.get("oneOf", [])):
            out += objects_of(branch)
        return out

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, prop in resolve(node).get("properties", {}).items():
            path = f"{prefix}{name}"
            rows.append((path, type_name(prop), prop.get("description", "")))
            objects = objects_of(prop)
            target = resolve(prop)
            if not objects and target.get("type") == "array":
                objects = objects_of(target.get("items", {}))
                path += "[]"
            for obj in objects:
                kind = obj.get("properties", {}).get("kind", {}).get("const")
                walk(obj, f"{path}{f' (kind={kind})' if kind and len(objects) > 1 else ''}.")

    walk(schema, "")
    lines = ["| field | type | description |", "|---|---|---|"]
    lines += [f"| `{p}` | {t} | {d} |" for p, t, d in rows]
    return "\n".join(lines) + "\n"
