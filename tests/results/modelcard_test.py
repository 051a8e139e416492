"""The hand-off's model card: README.md the Hugging Face hub reads, nothing it must not hold."""

from __future__ import annotations

import json
import logging
import random
import string
import warnings
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import ModelCard

from ftmanifest.errors import RefusedError
from ftmanifest.results import modelcard
from ftmanifest.results.report import write_report
from ftmanifest.scan.engine import scan_paths
from tests.conftest import run_cli

REPO = "Qwen/Qwen2.5-0.5B-Instruct"
REVISION = "03e404fd168941cfed98f46654680130dd85968b"


def _token() -> str:
    """A made-up token in GitHub's format, generated so no secret is committed."""
    rnd = random.Random(11)
    return "ghp_" + "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(36))


def card_data(root: Path) -> dict[str, Any]:
    """A report's data as ``audit`` hands it over, its paths absolute under ``root``."""
    return {
        "manifest": {"path": str(root / "exp.yaml"), "digest": "sha256:" + "a1" * 32},
        "signature": {"checked": True, "ok": True},
        "experiment": {
            "id": "docroute-lora-r16",
            "task": "classification",
            "hypothesis": "A rank-16 LoRA raises macro-F1 on held-out documents.",
        },
        "deliverable": {
            "path": str(root / "out" / "adapter"),
            "kind": "adapter",
            "tree_digest": "sha256:" + "b2" * 32,
            "files": [
                {"path": "adapter_model.safetensors", "digest": "sha256:" + "c3" * 32, "size": 6336}
            ],
            "binding": {
                "envelope": str(root / "out" / "adapter" / "ftmanifest-binding.sig.json"),
                "signers": ["alice@example.org"],
                "base_tensor_digest": "sha256-tensors:" + "d4" * 32,
                "ok": True,
            },
            "config": {"kind": "lora", "r": 16, "alpha": 32.0, "target_modules": ["q_proj"]},
        },
        "model": {
            "repo": REPO,
            "path": None,
            "revision": REVISION,
            "tree_digest": "sha256:" + "e5" * 32,
            "license": "apache-2.0",
        },
        "environment": {"python": "3.11.7"},
        "data": [
            {
                "name": "train",
                "role": "train",
                "path": str(root / "data" / "train.jsonl"),
                "digest": "sha256:" + "f6" * 32,
                "records": 18000,
                "license": "internal, approved by legal",
                "contains_personal_data": False,
            }
        ],
        "training": {"seq_len": 1024, "micro_batch": 8, "grad_accum": 4, "precision": "bf16"},
        "comparison": {
            "guards": [
                {"name": "guards[0] per_category f1", "verdict": "pass", "detail": "0 of 2 fail"}
            ],
            "per_category": [
                {
                    "category": "billing",
                    "metric": "f1",
                    "baseline": 0.61,
                    "candidate": 0.83,
                    "max_drop": 0.02,
                    "ci_low": 0.12,
                    "ci_high": 0.31,
                    "verdict": "pass",
                },
                {
                    "category": "returns",
                    "metric": "f1",
                    "baseline": 0.7,
                    "candidate": 0.69,
                    "max_drop": 0.02,
                    "ci_low": -0.04,
                    "ci_high": 0.02,
                    "verdict": "pass",
                },
            ],  # fmt: skip
            "changed_examples": {},
        },
        "findings": [],
        "history": None,
        "limits": f"only English tickets; trained from {root / 'data'}",
        "verdict": "ready",
    }


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    paths = write_report(data, tmp_path / "handoff")
    assert paths.model_card == tmp_path / "handoff" / "README.md"
    return paths.model_card


def test_card_is_read_by_huggingface_hub_without_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, card_data(tmp_path))
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
        warnings.simplefilter("error")
        card = ModelCard.load(path)
    assert not [r for r in caplog.records if r.name.startswith("huggingface_hub")]
    meta = card.data.to_dict()
    assert card.data.base_model == REPO
    assert meta["base_model_relation"] == "adapter"
    assert card.data.library_name == "peft"
    assert card.data.license == "apache-2.0"
    assert card.data.pipeline_tag == "text-generation"
    assert card.data.tags is not None and "ftmanifest" in card.data.tags
    pinned = meta["ftmanifest"]
    assert pinned["base_model"]["revision"] == REVISION
    assert pinned["manifest_digest"] == "sha256:" + "a1" * 32
    assert pinned["data"][0]["license"] == "internal, approved by legal"
    # the Hub reads `datasets` as Hub ids; local files are described, not linked
    assert "datasets" not in meta


def test_card_body_says_method_recipe_results_guards_limits_and_digests(tmp_path: Path) -> None:
    text = _write(tmp_path, card_data(tmp_path)).read_text()
    body = text.split("\n---\n", 1)[1]
    for section in ("Method", "Recipe", "Data", "Results against the baseline", "Guards",
                    "Observed limits", "Provenance"):  # fmt: skip
        assert f"## {section}" in body
    assert "| billing | f1 | 0.610 | 0.830 | [0.120, 0.310] | 0.020 | pass |" in body
    assert "| returns | f1 | 0.700 | 0.690 | [-0.040, 0.020] | 0.020 | pass |" in body
    for value in ('`["q_proj"]`', "An adapter fine-tuned", "seq\\_len", "`1024`", "`bf16`",
                  REVISION, "only English tickets",
                  "sha256:" + "a1" * 32, "sha256-tensors:" + "d4" * 32, "sha256:" + "c3" * 32,
                  "internal, approved by legal", "guards\\[0\\] per\\_category f1"):  # fmt: skip
        assert value in body, value


def test_card_holds_no_machine_path(tmp_path: Path) -> None:
    text = _write(tmp_path, card_data(tmp_path)).read_text()
    assert str(tmp_path) not in text
    assert str(Path.home()) not in text


def test_card_passes_ftmanifest_scan(tmp_path: Path) -> None:
    path = _write(tmp_path, card_data(tmp_path))
    assert scan_paths([path]).findings == []


def test_secret_in_free_text_refuses_the_whole_handoff(tmp_path: Path) -> None:
    """The handoff files would carry the token too: nothing is written, the field is named."""
    token = _token()
    data = card_data(tmp_path)
    data["experiment"]["hypothesis"] = f"raise F1; the key is {token}"
    with pytest.raises(modelcard.HandoffSecretError) as err:
        write_report(data, tmp_path / "handoff")
    shown = err.value.to_dict()
    assert shown["reason"] == "handoff-secret"
    assert shown["exit_code"] == 1
    assert shown["field"] == "experiment.hypothesis"
    assert "secret.github-pat" in str(shown["observed"])
    assert token not in str(shown)  # named, never printed whole
    assert not (tmp_path / "handoff").exists()  # nothing half-written


def test_personal_data_in_free_text_is_masked_in_the_card_only(tmp_path: Path) -> None:
    data = card_data(tmp_path)
    data["limits"] = "questions to jane.doe@mailbox.org"
    paths = write_report(data, tmp_path / "handoff")
    text = paths.model_card.read_text()
    assert "jane.doe@mailbox.org" not in text
    assert "[REDACTED:" in text
    assert paths.redacted == 1
    assert "1 value(s) that looked like a secret or personal data" in text
    assert scan_paths([paths.model_card]).findings == []
    # the hand-off record keeps the exact value (it is the record, not the published card)
    assert "jane.doe@mailbox.org" in paths.json.read_text()


def test_control_the_scan_would_flag_the_unmasked_text(tmp_path: Path) -> None:
    """The attack above fails without the masking: the same card text, unmasked, is flagged."""
    raw = tmp_path / "raw.md"
    raw.write_text(f"the key is {_token()}\n")
    assert scan_paths([raw]).findings


def test_card_that_still_holds_a_flagged_value_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: masking is checked by scanning the finished card again."""
    monkeypatch.setattr(modelcard, "_redact", lambda value, counter: value)
    data = card_data(tmp_path)
    data["limits"] = "questions to jane.doe@mailbox.org"
    with pytest.raises(RefusedError) as err:
        write_report(data, tmp_path / "handoff")
    assert err.value.exit_code == 1
    assert "jane.doe@mailbox.org" not in str(err.value.to_dict())
    assert not (tmp_path / "handoff").exists()  # nothing half-written


def test_licence_the_hub_does_not_list_is_other_with_a_name(tmp_path: Path) -> None:
    data = card_data(tmp_path)
    data["model"]["license"] = "Llama 3.1 Community License"
    card = ModelCard.load(_write(tmp_path, data))
    assert card.data.license == "other"
    assert card.data.to_dict()["license_name"] == "llama-3-1-community-license"


def test_local_base_model_has_no_base_model_key(tmp_path: Path) -> None:
    data = card_data(tmp_path)
    data["model"] = {"repo": None, "path": str(tmp_path / "model"), "revision": None}
    card = ModelCard.load(_write(tmp_path, data))
    assert card.data.base_model is None
    shown = card.data.to_dict()["ftmanifest"]["base_model"]["path"]
    assert shown.endswith("/model") and str(tmp_path) not in shown


def test_report_command_refuses_a_secret_naming_its_field(tmp_path: Path) -> None:
    token = _token()
    data = card_data(tmp_path)
    data["limits"] = f"token {token}"
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps({"ok": True, "report": data}))
    proc = run_cli("report", str(audit), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "limits" in proc.stderr and "handoff-secret" in proc.stderr
    assert token not in proc.stderr + proc.stdout
    assert not (tmp_path / "out").exists()


def test_report_command_writes_the_card_and_warns_on_masking(tmp_path: Path) -> None:
    data = card_data(tmp_path)
    data["limits"] = "questions to jane.doe@mailbox.org"
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps({"ok": True, "report": data}))
    proc = run_cli("report", str(audit), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "README.md" in proc.stdout
    assert "1 value(s) in the model card" in proc.stderr
    assert ModelCard.load(tmp_path / "out" / "README.md").data.library_name == "peft"
