"""A variant's declared changes against its real difference from its parent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.variant import variant_findings
from ftmanifest.verify import variant_check, verify_manifest

R16 = Path("manifests/docroute-lora-r16.yaml")
R32 = Path("manifests/docroute-lora-r32.yaml")


def _variant(tmp_path: Path, edit: Any, name: str = "variant.json") -> Path:
    doc = load_manifest(R32).canonical()
    edit(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _rules(path: Path) -> dict[str, str]:
    found = variant_findings(load_manifest(R16), load_manifest(path))
    return {f.field or "": f.rule for f in found}


def test_the_shipped_variant_is_fair() -> None:
    assert variant_findings(load_manifest(R16), load_manifest(R32)) == []


def test_two_undeclared_changes_are_refused_naming_both(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["seeds"]["python"] = 7
        doc["data"][0]["digest"] = "sha256:" + "1" * 64

    path = _variant(tmp_path, edit)
    rules = _rules(path)
    assert rules == {
        "seeds.python": "variant.undeclared-change",
        "data[train].digest": "variant.undeclared-change",
    }
    seeds = next(
        f
        for f in variant_findings(load_manifest(R16), load_manifest(path))
        if f.field == "seeds.python"
    )
    assert seeds.expected == "1234 (the parent's)" and seeds.observed == "7"


def test_a_declared_change_covers_the_fields_below_it(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["data"][0]["digest"] = "sha256:" + "1" * 64
        doc["data"][0]["records"] = 9
        doc["experiment"]["changes"]["data[train]"] = "a cleaned copy"

    assert _rules(_variant(tmp_path, edit)) == {}


def test_declared_but_unchanged_and_declared_with_another_value(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["experiment"]["changes"]["method.r"] = 64  # the manifest says 32
        doc["experiment"]["changes"]["seeds.python"] = 1234  # the parent's too

    rules = _rules(_variant(tmp_path, edit))
    assert rules == {
        "experiment.changes.method.r": "variant.declared-value-differs",
        "experiment.changes.seeds.python": "variant.declared-not-changed",
    }


def test_verify_finds_the_parent_beside_the_variant(tmp_path: Path) -> None:
    shutil.copy(R16, tmp_path / R16.name)
    (tmp_path / "notes.json").write_text("{}")  # not a manifest: skipped
    path = _variant(tmp_path, lambda doc: doc["seeds"].update(python=7))
    rows = [f for f in verify_manifest(path, signature=False, scan=False).findings
            if f.kind == "variant"]  # fmt: skip
    assert [(f.field, f.rule) for f in rows] == [("seeds.python", "variant.undeclared-change")]


def test_a_missing_or_ambiguous_parent_cannot_be_judged(tmp_path: Path) -> None:
    path = _variant(tmp_path, lambda doc: None)
    loaded = load_manifest(path)
    (missing,) = variant_check(loaded, path)
    assert missing.rule == "variant.parent-not-found" and missing.severity == "error"
    shutil.copy(R16, tmp_path / "a.yaml")
    assert variant_check(loaded, path) == []
    shutil.copy(R16, tmp_path / "b.yaml")
    (two,) = variant_check(loaded, path)
    assert two.observed == "2 manifests"
