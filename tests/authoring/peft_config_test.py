"""init --from a peft adapter_config.json, written with LoraConfig's field names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.authoring.conftest import derived, init_from

ADAPTER = {
    "peft_type": "LORA",
    "task_type": "CAUSAL_LM",
    "base_model_name_or_path": "org/tiny",
    "revision": None,
    "r": 4,
    "lora_alpha": 8,
    "lora_dropout": 0.0,
    "target_modules": ["v_proj", "q_proj"],
    "modules_to_save": None,
    "bias": "none",
    "use_rslora": True,
    "use_dora": False,
    "fan_in_fan_out": False,
    "init_lora_weights": True,
    "rank_pattern": {"q_proj": 8},
    "alpha_pattern": {},
    "layers_to_transform": [0],
    "inference_mode": True,
    "peft_version": "0.21.2",
}


def test_an_adapter_folder(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = project / "out"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps(ADAPTER))
    rc, payload, err = init_from(capsys, project / "exp.yaml", folder)
    assert rc == 0, err
    got = derived(payload)
    assert got["method.kind"] == "lora" and got["method.r"] == 4 and got["method.alpha"] == 8.0
    assert got["method.target_modules"] == ["q_proj", "v_proj"]
    assert got["method.use_rslora"] is True and got["method.rank_pattern"] == {"q_proj": 8}
    assert got["model.repo"] == "org/tiny"
    assert "layers_to_transform" in err  # no manifest field: named, not dropped
    assert "peft_version" not in err


def test_another_peft_type_is_a_peft_method(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = project / "ia3.json"
    source.write_text(json.dumps({"peft_type": "IA3", "target_modules": ["k_proj"]}))
    rc, payload, err = init_from(capsys, project / "exp.yaml", source)
    got = derived(payload)
    assert rc == 0 and got["method.kind"] == "peft" and got["method.peft_type"] == "IA3"
    assert got["method.config"] == {"target_modules": ["k_proj"]}
