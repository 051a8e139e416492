"""peft's matching and LoRA shapes from headers, checked against real peft."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.adapter import architecture as arch
from ftmanifest.adapter import headers
from ftmanifest.adapter.base import manifest_method_findings
from ftmanifest.adapter.tensors import tensor_shapes, weight_files
from ftmanifest.manifest import load_manifest
from tests.adapter.conftest import make_model, write_manifest


def base_shapes(folder: Path) -> dict[str, Any]:
    config = json.loads((folder / "config.json").read_text())
    return headers.with_tied_head(tensor_shapes(weight_files(folder)), config)


@pytest.mark.parametrize(
    ("arch_name", "lora"),
    [
        ("gpt2", {"target_modules": ["c_attn", "c_proj"]}),
        ("gpt2", {"target_modules": ["c_fc"], "modules_to_save": ["lm_head"]}),
        ("llama", {"target_modules": r".*\.(q|v)_proj", "bias": "all"}),
        ("llama", {"target_modules": ["q_proj", "down_proj"], "use_dora": True,
                   "modules_to_save": ["lm_head"]}),
    ],
)  # fmt: skip
def test_trainable_count_and_tensor_set_match_real_peft(
    models: dict[str, Path], arch_name: str, lora: dict[str, Any]
) -> None:
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    folder = models[f"{arch_name}-a"]
    config = json.loads((folder / "config.json").read_text())
    peft_model = get_peft_model(make_model(arch_name, 0), LoraConfig(r=4, lora_alpha=8, **lora))
    facts = arch.LoraFacts.from_adapter_config(peft_model.peft_config["default"].to_dict())
    expected = arch.expected_tensors(
        base_shapes(folder), facts, transposed=arch.is_transposed(config, facts)
    )
    saved = get_peft_model_state_dict(peft_model)
    assert {headers.PEFT_PREFIX + n: s for n, s in expected.items()} == {
        n: tuple(t.shape) for n, t in saved.items()
    }
    assert arch.trainable_params(expected) == peft_model.get_nb_trainable_parameters()[0]


def test_peft_matching_rules() -> None:
    facts = arch.LoraFacts(r=4, alpha=8, target_modules=["c_attn", "h.1.mlp.c_fc"])
    assert arch.wraps("transformer.h.0.attn.c_attn", facts)
    assert arch.wraps("transformer.h.1.mlp.c_fc", facts)
    assert not arch.wraps("transformer.h.0.mlp.c_fc", facts)
    assert not arch.wraps("transformer.h.0.attn.xc_attn", facts)
    regex = arch.LoraFacts(r=4, alpha=8, target_modules=r".*\.q_proj")
    assert arch.wraps("model.layers.0.self_attn.q_proj", regex)
    assert not arch.wraps("model.layers.0.self_attn.q_proj.x", regex)


def _manifest(tmp_path: Path, models: dict[str, Path], **method: Any) -> Path:
    import shutil

    shutil.copytree(models["llama-a"], tmp_path / "base")
    return write_manifest(tmp_path, "base", "llama", **method)


def test_verify_check_refuses_a_missing_target_and_a_wrong_count(
    models: dict[str, Path], tmp_path: Path
) -> None:
    path = _manifest(tmp_path, models, target_modules=["q_proj", "qkv"], trainable_params=7)
    found = manifest_method_findings(load_manifest(path).manifest, path)
    assert [(f.rule, f.observed) for f in found] == [("adapter.target-missing", "qkv")]
    body = json.loads(path.read_text())
    body["method"]["target_modules"] = ["q_proj", "v_proj"]
    path.write_text(json.dumps(body))
    found = manifest_method_findings(load_manifest(path).manifest, path)
    # 2 layers x 2 matrices x r * (in + out) = 4 * 4 * (16 + 16)
    assert [(f.rule, f.expected) for f in found] == [("adapter.trainable-params", "512")]
    body["method"]["trainable_params"] = 512
    path.write_text(json.dumps(body))
    assert manifest_method_findings(load_manifest(path).manifest, path) == []


def test_verify_check_names_a_layer_lora_cannot_wrap(
    models: dict[str, Path], tmp_path: Path
) -> None:
    path = _manifest(tmp_path, models, target_modules=["self_attn", "modules_to_save_x"],
                     modules_to_save=["nothead"])  # fmt: skip
    rules = [f.rule for f in manifest_method_findings(load_manifest(path).manifest, path)]
    assert rules == [
        "adapter.target-not-wrappable",
        "adapter.target-missing",
        "adapter.modules-to-save-missing",
    ]


@pytest.mark.parametrize("arch_name", ["gpt2", "llama"])
def test_all_linear_is_resolved_as_peft_does(models: dict[str, Path], arch_name: str) -> None:
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    folder = models[f"{arch_name}-a"]
    config = json.loads((folder / "config.json").read_text())
    lora = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear")
    peft_model = get_peft_model(make_model(arch_name, 0), lora)
    facts = arch.LoraFacts(r=4, alpha=8, target_modules="all-linear")
    shapes = base_shapes(folder)
    assert arch.check_targets(shapes, facts) == []
    expected = arch.expected_tensors(shapes, facts, transposed=arch.is_transposed(config, facts))
    saved = get_peft_model_state_dict(peft_model)
    assert {headers.PEFT_PREFIX + n for n in expected} == set(saved)
