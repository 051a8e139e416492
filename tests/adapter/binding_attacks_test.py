"""Attacks where the base (or adapter) that computes is not the one that was bound.
Each first proves, with a real transformers/peft load, that
the attack changes the logits, then that ``check-adapter``/``bind``/``load_bound``
refuse it with a finding naming the file, the field, expected, observed and a fix.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.adapter import AdapterRefusedError, load_bound
from ftmanifest.adapter.bind import BindRefusedError, bind_adapter
from ftmanifest.adapter.check import check_adapter
from ftmanifest.cli import main
from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from tests.adapter.conftest import copy_tree, train_adapter, write_manifest

IDS = [[1, 2, 3, 4, 5, 6]]


def logits(model: Any) -> Any:
    import torch

    model.eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor(IDS)).logits


def moved(a: Any, b: Any) -> bool:
    return bool((a - b).abs().max() > 1e-4)


def base_logits(folder: Path, **kw: Any) -> Any:
    from transformers import AutoModelForCausalLM

    return logits(AutoModelForCausalLM.from_pretrained(str(folder), **kw))


def adapter_logits(base: Path, adapter: Path, **kw: Any) -> Any:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base))
    return logits(PeftModel.from_pretrained(model, str(adapter), **kw))


def project_copy(bound: dict[str, Path], tmp_path: Path) -> Path:
    return shutil.copytree(bound["llama"], tmp_path / "p", symlinks=True)


def trust(project: Path) -> Path:
    return project / ".ftmanifest" / "allowed_signers"


def explained(found: list[Finding], rule: str) -> Finding:
    """The error with ``rule``; every error says where, what and how to fix it."""
    errors = [f for f in found if f.severity == "error"]
    for f in errors:
        assert f.path and f.field and f.expected and f.observed and f.hint, f
    hits = [f for f in errors if f.rule == rule]
    assert hits, found
    return hits[0]


# --- 1. an adapter inside the base folder ----------------------------------


def test_an_adapter_placed_inside_the_base_folder_is_refused(
    bound: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = project_copy(bound, tmp_path)
    base = project / "base"
    clean = base_logits(base)
    shutil.copy(project / "adapter" / "adapter_model.safetensors", base)
    config = json.loads((project / "adapter" / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(base)
    (base / "adapter_config.json").write_text(json.dumps(config))
    assert moved(base_logits(base), clean)  # transformers applies the adapter it finds
    for how in (["--manifest", str(project / "exp.json")],
                ["--base", str(base), "--trust", str(trust(project))]):  # fmt: skip
        assert main(["check-adapter", str(project / "adapter"), *how, "--format", "json"]) == 1
        found = [Finding(**f) for f in json.loads(capsys.readouterr().out)["findings"]]
        hit = explained(found, "adapter.base-holds-adapter")
        assert "adapter_config.json" in hit.message and "adapter_model.safetensors" in hit.message
        assert "loads" in hit.message and "not loaded" not in " ".join(f.message for f in found)
    with pytest.raises(AdapterRefusedError):
        load_bound(project / "adapter", manifest=project / "exp.json")


# --- 2. load_bound: the loaded config is the bound one ---------------------


@pytest.mark.parametrize("setting", [{"rms_norm_eps": 0.5}, {"hidden_act": "relu"}])
def test_load_bound_refuses_a_model_loaded_with_another_config(
    bound: dict[str, Path], setting: dict[str, Any]
) -> None:
    from transformers import AutoModelForCausalLM

    project = bound["llama"]
    model = AutoModelForCausalLM.from_pretrained(str(project / "base"), **setting)
    assert moved(logits(model), base_logits(project / "base"))
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(project / "adapter", manifest=project / "exp.json", model=model)
    hit = explained(info.value.findings, "adapter.base-config-differs")
    (key,) = setting
    assert hit.field == key and hit.observed == str(setting[key])


def test_load_bound_refuses_peft_arguments_that_change_the_adapter(
    bound: dict[str, Path],
) -> None:
    from peft import LoraConfig

    project = bound["llama"]
    plain = adapter_logits(project / "base", project / "adapter")
    other = LoraConfig(r=4, lora_alpha=800, target_modules=["q_proj", "v_proj"])
    assert moved(adapter_logits(project / "base", project / "adapter", config=other), plain)
    renamed = {r"q_proj": "v_proj"}
    for kw in ({"config": other}, {"key_mapping": renamed}):
        with pytest.raises(FtManifestError) as info:
            load_bound(project / "adapter", manifest=project / "exp.json", **kw)
        err = info.value
        assert err.exit_code == 2 and err.field in kw and err.observed and err.hint


def test_load_bound_refuses_a_config_swapped_after_the_check(
    bound: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ftmanifest.adapter import load as loadmod

    project = project_copy(bound, tmp_path)
    path = project / "base" / "config.json"
    real = loadmod.check_adapter

    def check_then_swap(*a: Any, **kw: Any) -> Any:
        report = real(*a, **kw)
        path.write_text(json.dumps({**json.loads(path.read_text()), "rms_norm_eps": 0.5}))
        return report

    monkeypatch.setattr(loadmod, "check_adapter", check_then_swap)
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(project / "adapter", manifest=project / "exp.json")
    assert explained(info.value.findings, "adapter.base-config-differs")


# --- 3. peft settings the manifest does not state --------------------------


def _peft_lora_manifest(project: Path) -> Path:
    """``method: {kind: peft, peft_type: LORA}`` naming plain LoRA's r, alpha, targets."""
    path = write_manifest(project, "base", "llama")
    body = json.loads(path.read_text())
    plain = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    body["method"] = {"kind": "peft", "peft_type": "LORA", "config": plain}
    path.write_text(json.dumps(body))
    return path


@pytest.mark.parametrize(
    ("setting", "default"),
    [({"layer_replication": [[0, 2], [1, 2]]}, None),
     ({"alora_invocation_tokens": [3, 4], "task_type": "CAUSAL_LM"}, None),
     ({"init_lora_weights": "olora"}, True), ({"init_lora_weights": "pissa"}, True)],
)  # fmt: skip
def test_bind_refuses_peft_settings_a_plain_lora_manifest_does_not_state(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path, signer: Any,
    setting: dict[str, Any], default: Any,
) -> None:  # fmt: skip
    project = project_copy(bound, tmp_path)
    shutil.rmtree(project / "adapter")
    adapter = train_adapter(project / "base", project / "adapter", "llama", **setting)
    key = next(iter(setting))  # aLoRA acts through PeftModelForCausalLM's forward
    plain = copy_tree(adapter, tmp_path / "plain")
    config = json.loads((plain / "adapter_config.json").read_text())
    (plain / "adapter_config.json").write_text(json.dumps({**config, key: default}))
    loaded = adapter_logits(project / "base", adapter)
    assert moved(loaded, adapter_logits(project / "base", plain))  # not plain LoRA
    manifest = _peft_lora_manifest(project)
    with pytest.raises(BindRefusedError) as info:
        bind_adapter(adapter, manifest, signer)
    fields = {f.field for f in info.value.findings if f.severity == "error"}
    assert any(key in (f or "") for f in fields), info.value.findings
    explained(info.value.findings, info.value.findings[0].rule)


@pytest.mark.parametrize("init", ["olora", "pissa", "corda", "loftq"])
def test_an_init_that_rewrites_the_base_at_load_is_refused_even_when_stated(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path, signer: Any, init: str
) -> None:
    """peft reruns OLoRA/PiSSA/CorDA/LoftQ init on load: the base that computes
    is rewritten after its digest was checked."""
    project = project_copy(bound, tmp_path)
    shutil.rmtree(project / "adapter")
    adapter = copy_tree(models["llama-adapter"], project / "adapter")
    path = adapter / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "init_lora_weights": init}))
    manifest = write_manifest(project, "base", "llama", init=init)
    with pytest.raises(BindRefusedError) as info:
        bind_adapter(adapter, manifest, signer)
    hit = explained(info.value.findings, "adapter.base-rewritten-at-load")
    assert hit.field == "init_lora_weights" and hit.observed == init
    assert "path_initial_model_for_weight_conversion" in (hit.hint or "")


def test_every_lora_config_field_of_the_installed_peft_is_in_the_table() -> None:
    import dataclasses

    from peft import LoraConfig

    from ftmanifest.adapter.lora_fields import FIELDS

    assert {f.name for f in dataclasses.fields(LoraConfig)} == set(FIELDS)
    for f in dataclasses.fields(LoraConfig):
        if f.default is not dataclasses.MISSING and not f.name.endswith("runtime_config"):
            assert FIELDS[f.name].default == f.default, f.name


# --- 4. configuration_files -------------------------------------------------


def test_a_base_config_that_points_at_another_config_file_is_refused(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    project = project_copy(bound, tmp_path)
    base = project / "base"
    clean = base_logits(base)
    config = json.loads((base / "config.json").read_text())
    (base / "config.4.0.0.json").write_text(json.dumps({**config, "rms_norm_eps": 0.5}))
    (base / "config.json").write_text(
        json.dumps({**config, "configuration_files": ["config.4.0.0.json"]})
    )
    assert moved(base_logits(base), clean)  # transformers reads config.4.0.0.json
    shutil.rmtree(project / "adapter")
    adapter = copy_tree(models["llama-adapter"], project / "adapter")
    manifest = write_manifest(project, "base", "llama")
    with pytest.raises(BindRefusedError) as info:
        bind_adapter(adapter, manifest, signer)
    hit = explained(info.value.findings, "adapter.base-config-indirect")
    assert hit.field == "configuration_files" and "config.4.0.0.json" in hit.observed


# --- 5. wrong types in adapter_config.json ---------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [("r", "four"), ("target_modules", 5), ("rank_pattern", ["q_proj", 2]),
     ("exclude_modules", 7), ("lora_alpha", [8]), ("layer_replication", 3)],
)  # fmt: skip
def test_a_mistyped_lora_field_is_unusable_input_not_a_crash(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path, signer: Any,
    capsys: pytest.CaptureFixture[str], key: str, value: Any,
) -> None:  # fmt: skip
    project = project_copy(bound, tmp_path)
    shutil.rmtree(project / "adapter")
    adapter = copy_tree(models["llama-adapter"], project / "adapter")
    path = adapter / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    with pytest.raises(FtManifestError) as info:
        bind_adapter(adapter, project / "exp.json", signer)
    err = info.value
    assert err.exit_code == 2, err
    assert err.path == str(path) and err.field == key and err.expected and err.hint
    assert err.observed == json.dumps(value)
    with pytest.raises(FtManifestError) as again:
        check_adapter(adapter, base_dir=project / "base", trust_path=trust(project))
    assert again.value.exit_code == 2 and again.value.field == key
    assert main(["check-adapter", str(adapter), "--manifest", str(project / "exp.json")]) == 2
    # bound first, edited after: refused as a changed file, never a crash
    bound_project = project_copy(bound, tmp_path / "b")
    path = bound_project / "adapter" / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    argv = ["check-adapter", str(bound_project / "adapter"),
            "--manifest", str(bound_project / "exp.json")]  # fmt: skip
    assert main(argv) in (1, 2)
    capsys.readouterr()
