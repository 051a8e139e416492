"""``ftmanifest export --format cyclonedx``: an ML-BOM CycloneDX's own validator accepts."""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import string
from pathlib import Path
from typing import Any

# jsonschema is loaded here, at collection, with every format checker (rfc3987-syntax
# included), before ftmanifest loads it without them: the strict validator keeps its formats
import jsonschema  # noqa: F401
import pytest
import yaml
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from ftmanifest.cli import export as export_cli
from ftmanifest.errors import InputError, RefusedError
from ftmanifest.manifest import load_manifest
from ftmanifest.results.export import export_manifest
from ftmanifest.results.mlbom import parse_lock
from ftmanifest.results.modelcard import HandoffSecretError
from tests.conftest import run_cli

SHIPPED = Path(__file__).parents[2] / "manifests" / "docroute-lora-r16.yaml"
HASH = "ab" * 32
LOCK = f"""\
# uv pip compile requirements.in --generate-hashes
--index-url https://pypi.org/simple
torch==2.13.0+cpu \\
    --hash=sha256:{HASH} \\
    --hash=sha256:{"cd" * 32}
Safe_Tensors==0.8.0  # via transformers
peft==0.21.2
"""


def _validate(text: str) -> None:
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None


def project(tmp_path: Path, lock: str = LOCK) -> Path:
    """The shipped manifest beside its lock file and a data file."""
    doc = yaml.safe_load(SHIPPED.read_text())
    doc["security"]["scan"]["on"] = doc["security"]["scan"].pop(True)  # YAML 1.1 reads `on` so
    (tmp_path / "requirements.lock").write_text(lock)
    doc["environment"]["lock"] = {
        "path": "requirements.lock",
        "digest": "sha256:" + hashlib.sha256(lock.encode()).hexdigest(),
    }
    train = tmp_path / "data" / "docroute" / "train.jsonl"
    train.parent.mkdir(parents=True)
    train.write_text('{"text": "x"}\n')
    doc["data"][0]["digest"] = "sha256:" + hashlib.sha256(train.read_bytes()).hexdigest()
    path = tmp_path / "exp.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


def audit_file(tmp_path: Path, manifest: Path, limits: str = "English only") -> Path:
    report = {
        "manifest": {"path": "exp.yaml", "digest": load_manifest(manifest).digest()},
        "deliverable": {
            "kind": "adapter",
            "tree_digest": "sha256:" + "1" * 64,
            "files": [{"path": "adapter_model.safetensors", "digest": "sha256:" + "2" * 64}],
            "binding": {"base_tensor_digest": "sha256-tensors:" + "3" * 64, "ok": True},
        },
        "comparison": {
            "per_category": [
                {
                    "category": "billing",
                    "metric": "f1",
                    "baseline": 0.61,
                    "candidate": 0.83,
                    "ci_low": 0.12,
                    "ci_high": 0.31,
                    "max_drop": 0.02,
                    "verdict": "pass",
                }
            ]  # fmt: skip
        },
        "limits": limits,
        "verdict": "ready",
    }
    path = tmp_path / "audit.json"
    path.write_text(json.dumps({"ok": True, "report": report}))
    return path


def _by_ref(bom: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["bom-ref"]: c for c in bom["components"]}


def test_bom_is_valid_cyclonedx_with_model_base_data_and_packages(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    text = export_manifest(manifest, fmt="cyclonedx").text
    _validate(text)
    bom = json.loads(text)
    model = bom["metadata"]["component"]
    assert model["type"] == "machine-learning-model"
    assert model["name"] == "docroute-lora-r16"
    params = model["modelCard"]["modelParameters"]
    assert params["approach"] == {"type": "supervised"}
    assert {"ref": "data:train"} in params["datasets"]
    refs = _by_ref(bom)
    base = refs["base-model"]
    assert base["version"] == "03e404fd168941cfed98f46654680130dd85968b"
    assert base["purl"] == (
        "pkg:huggingface/Qwen/Qwen2.5-0.5B-Instruct@03e404fd168941cfed98f46654680130dd85968b"
    )
    weights = {f["name"]: f for f in base["components"]}["model.safetensors"]
    assert weights["hashes"] == [
        {
            "alg": "SHA-256",
            "content": "9372c470eeadd5ecd9c3c74c2b3cb633f8e2f2fad799250a0f70d652b6b825e4",
        }
    ]
    assert base["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    train = refs["data:train"]
    assert train["type"] == "data"
    assert train["hashes"][0]["alg"] == "SHA-256"
    assert train["licenses"][0]["license"]["name"].startswith("internal")
    # the eval split is not here: its digest cannot be told a file's, it stays a property
    assert "hashes" not in refs["data:eval"]
    torch = refs["pkg:pypi/torch@2.13.0%2Bcpu"]
    assert torch["type"] == "library" and torch["version"] == "2.13.0+cpu"
    assert {"alg": "SHA-256", "content": HASH} in torch["hashes"]
    assert "pkg:pypi/safe-tensors@0.8.0" in refs  # the lock's name, normalised
    assert "pkg:pypi/transformers@5.24.0" in refs  # environment.packages, not in the lock
    assert "pkg:pypi/peft@0.21.2" in refs and "hashes" not in refs["pkg:pypi/peft@0.21.2"]
    assert str(tmp_path) not in text
    assert sorted(bom["dependencies"][0]["dependsOn"]) == sorted(refs)


def test_bom_with_audit_carries_results_limits_and_files(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    text = export_manifest(manifest, fmt="cyclonedx", audit=audit_file(tmp_path, manifest)).text
    _validate(text)
    card = json.loads(text)["metadata"]["component"]
    metrics = card["modelCard"]["quantitativeAnalysis"]["performanceMetrics"]
    diff = next(m for m in metrics if m["type"] == "f1 (candidate - baseline)")
    assert diff["slice"] == "category=billing"
    assert diff["confidenceInterval"] == {"lowerBound": "0.12", "upperBound": "0.31"}
    assert card["modelCard"]["considerations"]["technicalLimitations"] == ["English only"]
    assert card["components"][0]["hashes"] == [{"alg": "SHA-256", "content": "2" * 64}]


def test_two_exports_are_byte_identical_and_serial_follows_content(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    first = export_manifest(manifest, fmt="cyclonedx").text
    assert export_manifest(manifest, fmt="cyclonedx").text == first
    audited = export_manifest(manifest, fmt="cyclonedx", audit=audit_file(tmp_path, manifest))
    serials = {json.loads(t)["serialNumber"] for t in (first, audited.text)}
    assert len(serials) == 2 and all(s.startswith("urn:uuid:") for s in serials)


def test_secret_in_audit_limits_is_refused(tmp_path: Path) -> None:
    rnd = random.Random(5)
    token = "ghp_" + "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(36))
    manifest = project(tmp_path)
    with pytest.raises(HandoffSecretError) as err:
        export_manifest(
            manifest, fmt="cyclonedx", audit=audit_file(tmp_path, manifest, f"key {token}")
        )
    assert err.value.exit_code == 1 and token not in str(err.value.to_dict())


def test_personal_data_in_audit_limits_is_masked(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    out = export_manifest(
        manifest,
        fmt="cyclonedx",
        audit=audit_file(tmp_path, manifest, "questions to jane.doe@mailbox.org"),
    )
    assert "jane.doe@mailbox.org" not in out.text and out.redacted == 1
    _validate(out.text)


def test_lock_file_changed_since_the_manifest_pinned_it_is_refused(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    (tmp_path / "requirements.lock").write_text(LOCK + "evil==1.0\n")
    with pytest.raises(RefusedError) as err:
        export_manifest(manifest, fmt="cyclonedx")
    assert err.value.field == "environment.lock.digest" and err.value.exit_code == 1


def test_audit_of_another_manifest_is_refused(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    audit = audit_file(tmp_path, manifest)
    (tmp_path / "other").mkdir()
    other = project(tmp_path / "other")
    text = other.read_text().replace('"max_steps": 1200', '"max_steps": 1300')
    other.write_text(text)
    with pytest.raises(RefusedError) as err:
        export_manifest(other, fmt="cyclonedx", audit=audit)
    assert err.value.field == "manifest.digest"


def test_unpinned_manifest_is_refused_with_lint_findings(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    manifest.write_text(
        manifest.read_text().replace('"03e404fd168941cfed98f46654680130dd85968b"', '"main"')
    )
    with pytest.raises(RefusedError) as err:
        export_manifest(manifest, fmt="cyclonedx")
    assert err.value.findings and err.value.field == "model.revision"


def test_parse_lock_reads_pins_hashes_and_skips_options() -> None:
    locked = {p.name: p for p in parse_lock(LOCK + "-e .\nfoo>=1\n")}
    assert locked["torch"].version == "2.13.0+cpu" and len(locked["torch"].hashes) == 2
    assert locked["foo"].version is None
    assert set(locked) == {"torch", "safe-tensors", "peft", "foo"}


def test_cli_writes_file_and_refuses_bad_input_without_traceback(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    out = tmp_path / "bom" / "bom.cdx.json"
    proc = run_cli("export", str(manifest), "--format", "cyclonedx", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    _validate(out.read_text())
    stdout = run_cli("export", str(manifest), "--format", "cyclonedx")
    assert stdout.returncode == 0 and stdout.stdout == out.read_text()
    bad = run_cli("export", str(manifest), "--format", "spdx")
    assert bad.returncode == 2 and "cyclonedx" in bad.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("ftmanifest: 1\nexperiment: [\n")
    proc = run_cli("export", str(broken), "--format", "cyclonedx")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "broken.yaml" in proc.stderr
    manifest.write_text(
        manifest.read_text().replace('"03e404fd168941cfed98f46654680130dd85968b"', '"main"')
    )
    proc = run_cli("export", str(manifest), "--format", "cyclonedx")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "lint" in proc.stderr


def test_unknown_format_from_the_library_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        export_manifest(project(tmp_path), fmt="spdx")
    parser = argparse.ArgumentParser()
    export_cli.add_parser(parser.add_subparsers())
