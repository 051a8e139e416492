"""``ftmanifest diff``: the semantic difference of two manifests by field path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftmanifest.cli import main
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.canonical import canonical_json
from ftmanifest.manifest.diff import Change, diff_manifests, diff_values

R16 = Path("manifests/docroute-lora-r16.yaml")
R32 = Path("manifests/docroute-lora-r32.yaml")


def _fields(a: Path, b: Path) -> list[str]:
    return [c.field for c in diff_manifests(load_manifest(a), load_manifest(b))]


def test_the_shipped_variant_differs_in_exactly_these_fields() -> None:
    assert _fields(R16, R32) == [
        'experiment.changes["method.alpha"]',
        'experiment.changes["method.r"]',
        "experiment.hypothesis",
        "experiment.id",
        "experiment.parent",
        "export.path",
        "method.alpha",
        "method.r",
        "method.trainable_params",
    ]


def test_format_comments_key_order_and_explicit_defaults_are_not_changes(tmp_path: Path) -> None:
    doc = load_manifest(R16).canonical()
    as_json = tmp_path / "same.json"
    as_json.write_text(json.dumps(dict(reversed(list(doc.items())))))
    assert _fields(R16, as_json) == []
    commented = tmp_path / "commented.yaml"
    commented.write_text("# a new comment\n" + R16.read_text().replace("\n", "  # note\n", 3))
    assert _fields(R16, commented) == []
    doc["security"] = {**doc.get("security", {}), "rehash": "on-stat-change"}  # the default
    explicit = tmp_path / "explicit.json"
    explicit.write_text(json.dumps(doc))
    assert _fields(R16, explicit) == []


def test_entries_are_matched_by_name_not_position(tmp_path: Path) -> None:
    doc = load_manifest(R16).canonical()
    doc["data"] = list(reversed(doc["data"]))
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(doc))
    assert _fields(R16, moved) == []
    name = doc["data"][0]["name"]
    doc["data"][0]["digest"] = "sha256:" + "0" * 64
    doc["data"].append({**doc["data"][1], "name": "extra"})
    del doc["data"][1]
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(doc))
    changes = {c.field: c.kind for c in diff_manifests(load_manifest(R16), load_manifest(changed))}
    assert changes[f"data[{name}].digest"] == "changed"
    assert changes["data[extra]"] == "added"
    assert [k for k, v in changes.items() if v == "removed"] != []


def test_keys_with_dots_are_quoted() -> None:
    old = {"environment": {"packages": {"zope.interface": "5.0"}}}
    new = {"environment": {"packages": {"zope.interface": "6.0"}}}
    assert diff_values(old, new) == [
        Change('environment.packages["zope.interface"]', "changed", "5.0", "6.0")
    ]


def test_bool_and_number_are_different_values() -> None:
    assert diff_values({"a": True}, {"a": 1}) == [Change("a", "changed", True, 1)]
    assert diff_values({"a": 1}, {"a": 1.0}) == []


def test_cli_exit_codes_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(R16), str(R16)]) == 0
    assert "say the same" in capsys.readouterr().out
    assert main(["diff", str(R16), str(R32), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["identical"] is False
    row = next(c for c in doc["changes"] if c["field"] == "method.r")
    assert row == {"field": "method.r", "kind": "changed", "old": 16, "new": 32}


def test_cli_unusable_manifest_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("ftmanifest: 1\nexperiment: {id: x}\nnot_a_field: 1\n")
    assert main(["diff", str(R16), str(bad)]) == 2


LEAF = st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet="ab.", max_size=3)
VALUES = st.recursive(
    LEAF,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet="xyz.", min_size=1, max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(VALUES, VALUES)
def test_no_changes_exactly_when_the_canonical_forms_agree(a: object, b: object) -> None:
    assert diff_values(a, a) == []
    assert (diff_values(a, b) == []) == (canonical_json(a) == canonical_json(b))
