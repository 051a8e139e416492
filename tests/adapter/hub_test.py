"""An adapter bound to a hub base (``repo@commit``), checked with ``--base-repo``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.adapter.bind import bind_adapter
from ftmanifest.adapter.check import check_adapter
from ftmanifest.cli import main
from tests.adapter.conftest import LORA, TARGETS, trust_repo
from tests.conftest import hub_project


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.fixture
def hub_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models: dict[str, Path], signer: Any
) -> tuple[Path, dict[str, str]]:
    from ftmanifest.manifest import load_manifest
    from ftmanifest.snapshot import observe_model

    snapshots = {"v1": _files(models["gpt2-a"]), "v2": _files(models["gpt2-b"])}
    manifest, commits = hub_project(tmp_path, monkeypatch, snapshots, main="v2")
    work = manifest.parent
    trust_repo(work, signer)
    body = {
        "ftmanifest": 1,
        "experiment": {"id": "hub-lora"},
        "model": {"repo": "org/tiny", "revision": commits["v1"]},
        "method": {"kind": "lora", "r": LORA["r"], "alpha": LORA["lora_alpha"],
                   "target_modules": TARGETS["gpt2"]},
        "export": {"path": "adapter"},
    }  # fmt: skip
    path = work / "exp.json"
    path.write_text(json.dumps(body))
    state = observe_model(load_manifest(path).manifest, work, use_cache=False, allow_outside=False)
    body["model"]["tree_digest"] = state.tree_digest
    path.write_text(json.dumps(body))
    shutil.copytree(models["gpt2-adapter"], work / "adapter")
    bind_adapter(work / "adapter", path, signer)
    return work, commits


def test_hub_binding_names_repo_and_commit(hub_bound: tuple[Path, dict[str, str]]) -> None:
    work, commits = hub_bound
    config = json.loads((work / "adapter" / "adapter_config.json").read_text())
    assert (config["base_model_name_or_path"], config["revision"]) == ("org/tiny", commits["v1"])
    report = check_adapter(work / "adapter")  # the base the binding names
    assert report.ok and report.findings == [], report.findings
    assert report.binding is not None and report.binding.base_revision == commits["v1"]


def test_base_repo_at_another_revision_is_refused(
    hub_bound: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    work, commits = hub_bound
    adapter = str(work / "adapter")
    assert main(["check-adapter", adapter, "--base-repo", "org/tiny", "--revision",
                 commits["v1"]]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["check-adapter", adapter, "--base-repo", "org/tiny", "--revision",
                 commits["v2"], "--format", "json"]) == 1  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert [f["rule"] for f in doc["findings"]] == ["adapter.base-weights-differ"]
    assert f"org/tiny@{commits['v1']}" in doc["findings"][0]["message"]


def test_versions_other_than_bound_are_warnings(hub_bound: tuple[Path, dict[str, str]],
                                                signer: Any) -> None:  # fmt: skip
    from dataclasses import replace

    from ftmanifest.adapter.signed import sign_binding

    work, _ = hub_bound
    report = check_adapter(work / "adapter")
    assert report.binding is not None
    old = replace(report.binding, versions={**report.binding.versions, "peft": "0.0.1"})
    sign_binding(work / "adapter", old, signer)
    again = check_adapter(work / "adapter")
    assert again.ok
    assert [(f.rule, f.severity, f.expected) for f in again.findings] == [
        ("adapter.version-differs", "warning", "0.0.1")
    ]
