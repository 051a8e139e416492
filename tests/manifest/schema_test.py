"""The model is the source of truth; the committed schema, the packaged copy,
the fast checker and the jsonschema library must all agree with it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ftmanifest.manifest import FORMAT_VERSION
from ftmanifest.manifest.load import read_document
from ftmanifest.manifest.model import Manifest
from ftmanifest.manifest.schema import generate, packaged, render
from ftmanifest.manifest.validate import SchemaChecker
from tests.conftest import EXAMPLES, ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "manifests"
VALID = sorted((FIXTURES / "valid").iterdir()) + EXAMPLES
INVALID = sorted((FIXTURES / "invalid").iterdir())
SCHEMA = generate()
CHECKER = SchemaChecker(SCHEMA)
LIBRARY = jsonschema.Draft202012Validator(SCHEMA)


def test_committed_schema_is_current() -> None:
    committed = (ROOT / "schema" / "ftmanifest.schema.json").read_text("utf-8")
    assert committed == render(SCHEMA), "schema is stale: run `make schema`"


def test_packaged_schema_is_current() -> None:
    assert packaged() == SCHEMA, "packaged schema is stale: run `make schema`"


def test_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_model_accepts_exactly_the_format_version() -> None:
    assert SCHEMA["properties"]["ftmanifest"]["const"] == FORMAT_VERSION


def _properties(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = [(f"(root).{k}", v) for k, v in schema.get("properties", {}).items()]
    for name, d in schema["$defs"].items():
        out += [(f"{name}.{k}", v) for k, v in d.get("properties", {}).items()]
    return out


def test_every_field_has_a_description() -> None:
    missing = [name for name, prop in _properties(SCHEMA) if not prop.get("description")]
    assert missing == []


def _verdicts(data: Any) -> tuple[bool, bool, bool]:
    ours = not CHECKER.problems(data)
    library = LIBRARY.is_valid(data)
    try:
        Manifest.model_validate_json(json.dumps(data), strict=True)
        model = True
    except ValidationError:
        model = False
    return ours, library, model


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_examples_pass_everywhere(path: Path) -> None:
    assert _verdicts(read_document(path).data) == (True, True, True)


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_examples_fail_everywhere(path: Path) -> None:
    data = read_document(path).data
    assert _verdicts(data) == (False, False, False)
    # and the checker names a field the file's name is about
    assert CHECKER.problems(data)[0].message


# --- differential fuzzing: mutated manifests get one verdict ---------------

BASE = [read_document(p).data for p in VALID]
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(-2, 2, allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(
        [
            "lora",
            "full",
            "per_category",
            "cuda",
            "test",
            "sha256:" + "a" * 64,
            "==1.0",
            "0640",
            "x y",
            "",
        ]
    ),
    st.lists(st.text(max_size=5), max_size=2),
    st.just({}),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    data = copy.deepcopy(draw(st.sampled_from(BASE)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p and p != ("ftmanifest",)]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["set", "delete", "add"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "r", "kind", "digest", "name"]))] = draw(
                ODD_VALUES
            )
        else:
            parent[path[-1]] = draw(ODD_VALUES)
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_checker_and_model_agree_on_mutated_manifests(data: Any) -> None:
    ours, library, model = _verdicts(data)
    assert ours == model, [(p.loc, p.message) for p in CHECKER.problems(data)]
    # JSON Schema counts 2.0 as an integer; pydantic's strict mode (and ours) do not.
    if not _has_integral_float(data):
        assert library == model


def _has_integral_float(node: Any) -> bool:
    if isinstance(node, float):
        return node.is_integer()
    if isinstance(node, dict):
        return any(_has_integral_float(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_integral_float(v) for v in node)
    return False
