"""Every ``bom-ref`` of the ML-BOM is unique (CycloneDX 1.6 requires it; the JSON
schema cannot check it, so the strict validator passes a BOM that breaks it), whatever
the manifest's data sets are named."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from ftmanifest.results.export import export_manifest
from tests.results.mlbom_test import _validate, project


def _refs(component: dict[str, Any]) -> list[str]:
    return [component["bom-ref"], *(r for c in component.get("components", []) for r in _refs(c))]


def _all_refs(text: str) -> list[str]:
    bom = json.loads(text)
    return [r for c in [bom["metadata"]["component"], *bom["components"]] for r in _refs(c)]


def test_a_data_set_named_like_another_sets_script_gets_its_own_ref(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    doc = json.loads(manifest.read_text())
    train = doc["data"][0]
    script = train["cleaning"][0]["path"]
    twin = copy.deepcopy(train)
    twin["name"] = f"{train['name']}/{script}"  # what the script's ref would read
    doc["data"].append(twin)
    manifest.write_text(json.dumps(doc))
    text = export_manifest(manifest, fmt="cyclonedx").text
    _validate(text)
    refs = _all_refs(text)
    assert len(refs) == len(set(refs)), sorted(r for r in refs if refs.count(r) > 1)
    datasets = json.loads(text)["metadata"]["component"]["modelCard"]["modelParameters"]
    assert len(datasets["datasets"]) == len(doc["data"])  # each data set referenced once


def test_control_plain_names_keep_their_readable_refs(tmp_path: Path) -> None:
    text = export_manifest(project(tmp_path), fmt="cyclonedx").text
    refs = _all_refs(text)
    assert "data:train" in refs and "data:train/scripts/clean_tickets.py" in refs
    assert len(refs) == len(set(refs))
