"""load_bound and the loaded-base check, with real peft on tiny real models."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ftmanifest.adapter import AdapterRefusedError, check_loaded_base, load_bound
from ftmanifest.adapter.check import check_adapter


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_load_bound_loads_on_the_bound_base(bound: dict[str, Path], arch: str) -> None:
    from peft import PeftModel

    project = bound[arch]
    model = load_bound(project / "adapter", manifest=project / "exp.json")
    assert isinstance(model, PeftModel)
    assert any("lora_A" in name for name, _ in model.named_parameters())


def test_load_bound_refuses_another_base(bound: dict[str, Path], models: dict[str, Path]) -> None:
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(
            bound["gpt2"] / "adapter",
            base_dir=models["gpt2-b"],
            trust_path=bound["gpt2"] / ".ftmanifest" / "allowed_signers",
        )
    assert info.value.exit_code == 1
    assert {f.rule for f in info.value.findings} == {"adapter.base-weights-differ"}


def test_load_bound_refuses_a_changed_adapter(bound: dict[str, Path], tmp_path: Path) -> None:
    project = shutil.copytree(bound["llama"], tmp_path / "p")
    config = project / "adapter" / "adapter_config.json"
    config.write_text(config.read_text().replace('"lora_alpha": 8', '"lora_alpha": 80'))
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(project / "adapter", manifest=project / "exp.json")
    assert {f.rule for f in info.value.findings} == {
        "adapter.files-changed",
        "adapter.method-differs",
    }


def test_a_loaded_base_is_checked_by_its_state_dict(
    bound: dict[str, Path], models: dict[str, Path]
) -> None:
    from transformers import AutoModelForCausalLM

    report = check_adapter(bound["gpt2"] / "adapter", manifest=bound["gpt2"] / "exp.json")
    assert report.binding is not None
    digest = report.binding.base_tensor_digest
    a = AutoModelForCausalLM.from_pretrained(str(models["gpt2-a"]))  # tied lm_head
    assert check_loaded_base(a, digest) == []
    b = AutoModelForCausalLM.from_pretrained(str(models["gpt2-b"]))
    assert [f.rule for f in check_loaded_base(b, digest)] == ["adapter.base-weights-differ"]
    with pytest.raises(AdapterRefusedError):
        load_bound(bound["gpt2"] / "adapter", manifest=bound["gpt2"] / "exp.json", model=b)
    loaded = load_bound(bound["gpt2"] / "adapter", manifest=bound["gpt2"] / "exp.json", model=a)
    assert loaded.base_model.model is a
