"""The hand-written validator understands every keyword the generated schema uses.

``validate.SchemaChecker`` skips what it does not know; a model change that
makes pydantic emit a new keyword (``uniqueItems``, ``multipleOf``, a list of
types...) would be ignored by ``lint`` without a word.  This test fails first.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from ftmanifest.manifest import validate
from ftmanifest.manifest.schema import generate

# Keywords whose value holds subschemas, by shape (JSON Schema 2020-12, Core 10).
_SCHEMA_MAPS = {"properties", "$defs", "patternProperties", "dependentSchemas"}
_SCHEMA_ONE = {
    "items", "additionalProperties", "propertyNames", "not", "contains", "if", "then", "else",
    "unevaluatedProperties", "unevaluatedItems",
}  # fmt: skip
_SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}

# What SchemaChecker asserts.
CHECKED = {
    "$ref", "$defs", "allOf", "anyOf", "oneOf", "discriminator", "type", "const", "enum",
    "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "properties", "required", "propertyNames", "additionalProperties",
    "minItems", "maxItems", "items",
}  # fmt: skip
# Annotations: they assert nothing, in the checker or in JSON Schema itself.
ANNOTATIONS = {"$schema", "$id", "title", "description", "default", "examples", "deprecated"}


def _keywords(schema: Any, where: str = "#") -> Iterator[tuple[str, str, Any]]:
    """(keyword, where it is, value) for every keyword of every subschema."""
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        yield key, where, value
        if key in _SCHEMA_MAPS:
            for name, sub in value.items():
                yield from _keywords(sub, f"{where}/{key}/{name}")
        elif key in _SCHEMA_ONE:
            yield from _keywords(value, f"{where}/{key}")
        elif key in _SCHEMA_LISTS:
            for i, sub in enumerate(value):
                yield from _keywords(sub, f"{where}/{key}/{i}")


SCHEMA = generate()
USED = list(_keywords(SCHEMA))


def test_every_keyword_in_the_schema_is_checked_or_an_annotation() -> None:
    unknown = sorted({(k, w) for k, w, _ in USED if k not in CHECKED | ANNOTATIONS})
    assert not unknown, (
        "the schema uses keywords validate.SchemaChecker does not implement "
        f"(teach it, then add them to CHECKED): {unknown[:10]}"
    )


def test_checked_keywords_are_read_by_the_checker() -> None:
    """CHECKED stays honest: each keyword appears in the checker's source."""
    source = inspect.getsource(validate)
    missing = sorted(k for k in CHECKED if f'"{k}"' not in source and k != "$defs")
    assert missing == []
    assert '"$defs"' in source


def test_types_are_single_names_the_checker_knows() -> None:
    known = validate._TYPE_NAMES
    types = {
        (w, repr(v)) for k, w, v in USED if k == "type" and (type(v) is not str or v not in known)
    }
    assert not types, f"the checker reads one type name per schema: {sorted(types)[:10]}"


def test_refs_point_into_defs() -> None:
    refs = {v for k, _, v in USED if k == "$ref"}
    assert refs and all(r.startswith("#/$defs/") and r[8:] in SCHEMA["$defs"] for r in refs)


def test_discriminators_name_a_property_and_known_defs() -> None:
    for key, where, value in USED:
        if key == "discriminator":
            assert isinstance(value.get("propertyName"), str), where
            for target in value.get("mapping", {}).values():
                assert target.startswith("#/$defs/") and target[8:] in SCHEMA["$defs"], where


def test_the_walk_sees_nested_keywords() -> None:
    """Guard the guard: keywords only found inside $defs and properties are seen."""
    seen = {k for k, _, _ in USED}
    assert {"pattern", "enum", "items", "discriminator", "exclusiveMinimum"} <= seen
