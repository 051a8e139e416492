"""DPO's reference model under the guard: real TRL DPOTrainer, tiny real model, on the CPU.

The reference model scores every pair the policy learns from, so it is held
to the same pinned base as the policy (origin and weights), named
``ref_model``.  TRL's own references pass: none (TRL loads the policy's
origin again) and, for a peft model, the frozen ``ref`` adapter TRL copies
from the policy's initial adapter.  A second adapter that trains is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="TRL is a test extra: pip install -e '.[dev]'")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import DPOTrainer  # noqa: E402

from ftmanifest.integrations.transformers import (  # noqa: E402
    DriftRefusedError,
    FtManifestCallback,
    dpo_config,
    lora_config,
)
from tests.integrations.trl_test import QUIET, _declare_dpo, _preferences  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")
LORA = "method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj, v_proj]\n"


def _dpo(manifest: Path, out: Path, model: Any, ref_model: Any = None) -> DPOTrainer:
    return DPOTrainer(
        model=model,
        ref_model=ref_model,
        args=dpo_config(manifest, output_dir=str(out), **QUIET),
        train_dataset=_preferences(manifest),
        processing_class=AutoTokenizer.from_pretrained(manifest.parent / "model"),
        callbacks=[FtManifestCallback(manifest, signature=False)],
    )


def _base(manifest: Path) -> Any:
    return AutoModelForCausalLM.from_pretrained(manifest.parent / "model")


def _refused(trainer: DPOTrainer) -> list[Any]:
    with pytest.raises(DriftRefusedError) as err:
        trainer.train()
    assert trainer.state.global_step == 0
    return list(err.value.report.findings)


def _other_model(manifest: Path, folder: Path) -> Path:
    """Another model: the pinned architecture with other weights, saved elsewhere."""
    other = _base(manifest)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.5)
    other.save_pretrained(folder)
    return folder


def test_a_ref_model_from_another_folder_is_refused_naming_ref_model(
    example: Path, tmp_path: Path
) -> None:
    _declare_dpo(example, 0.1)
    other = AutoModelForCausalLM.from_pretrained(_other_model(example, tmp_path / "other"))
    rows = _refused(_dpo(example, tmp_path / "o", _base(example), other))
    named = [f for f in rows if "ref_model" in f.message]
    assert named, rows
    assert {f.rule for f in named} == {"drift.model-origin"}
    assert all(f.extra.get("model") == "ref_model" for f in named)
    assert str(tmp_path / "other") in str(named[0].observed)
    assert "load_pinned" in str(named[0].hint) or "ref_model" in str(named[0].hint)


def test_a_ref_model_with_other_weights_in_the_pinned_folders_name_is_refused(
    example: Path, tmp_path: Path
) -> None:
    """Named like the pinned folder, other weights: the weights are compared too."""
    _declare_dpo(example, 0.1)
    ref = _base(example)
    with torch.no_grad():
        for p in ref.parameters():
            p.mul_(1.5)
    rows = _refused(_dpo(example, tmp_path / "o", _base(example), ref))
    named = [f for f in rows if f.extra.get("model") == "ref_model"]
    assert {f.rule for f in named} == {"drift.model-weights"}, rows


@pytest.mark.parametrize("how", ["none", "pinned"])
def test_trls_own_reference_and_the_pinned_base_as_ref_model_train(
    example: Path, tmp_path: Path, how: str
) -> None:
    _declare_dpo(example, 0.1)
    ref = None if how == "none" else _base(example)
    trainer = _dpo(example, tmp_path / "o", _base(example), ref)
    trainer.train()
    assert trainer.state.global_step == 3
    guard = next(c for c in trainer.callback_handler.callbacks if isinstance(c, FtManifestCallback))
    assert guard.record is not None
    traced = guard.record["model_origin"]["ref_model"]
    assert traced["traced"] is True and traced["weights_compared"] > 0


def test_trls_ref_adapter_beside_a_lora_built_from_the_manifest_trains(
    example: Path, tmp_path: Path
) -> None:
    from peft import get_peft_model

    _declare_dpo(example, 0.1)
    example.write_text(example.read_text("utf-8").replace("method:\n  kind: full\n", LORA))
    model = get_peft_model(_base(example), lora_config(example))
    trainer = _dpo(example, tmp_path / "o", model)
    assert sorted(trainer.model.peft_config) == ["default", "ref"]  # TRL added its copy
    trainer.train()
    assert trainer.state.global_step == 3


def test_a_second_trainable_adapter_is_still_refused(example: Path, tmp_path: Path) -> None:
    from peft import get_peft_model

    _declare_dpo(example, 0.1)
    example.write_text(example.read_text("utf-8").replace("method:\n  kind: full\n", LORA))
    model = get_peft_model(_base(example), lora_config(example))
    model.add_adapter("ref", lora_config(example))
    for name, p in model.named_parameters():
        if ".ref." in name:
            p.requires_grad_(True)  # a "reference" that trains is no reference
    trainer = _dpo(example, tmp_path / "o", model, _base(example))
    rows = _refused(trainer)
    assert any(f.field == "method" and "adapters" in f.message for f in rows), rows
