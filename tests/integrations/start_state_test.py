"""What training starts from, judged before step 1: the adapter's starting weights and
the collator.

A real ``transformers.Trainer`` with a real peft LoRA on the tiny example, on the CPU.
A LoRA whose ``lora_B`` matrices are not zero at step 0 was loaded from an earlier
run (``PeftModel.from_pretrained(..., is_trainable=True)``): the manifest pins a fresh
start (``method.init: true``), so it is refused; a fresh ``get_peft_model`` trains, and
so does a resume from the run's own checkpoint.  ``DataCollatorWithFlattening`` packs
the micro-batch into one row: refused unless the manifest pins packing.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, DataCollatorWithFlattening

from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.transformers import FtManifestCallback, lora_config
from tests.integrations.trainer_guard_test import example, locked, refused  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
LORA = "method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj, v_proj]\n"


def _lora_manifest(manifest: Path) -> Path:
    manifest.write_text(manifest.read_text("utf-8").replace("method:\n  kind: full\n", LORA))
    return manifest


def _fresh(manifest: Path) -> Any:
    from peft import get_peft_model

    base = AutoModelForCausalLM.from_pretrained(manifest.parent / "model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_peft_model(base, lora_config(manifest))


def _guard(manifest: Path) -> FtManifestCallback:
    return FtManifestCallback(manifest, signature=False)


def _warm(manifest: Path, folder: Path) -> Any:
    """A LoRA as an earlier run leaves it (lora_B trained), loaded to train on."""
    from peft import PeftModel

    earlier = _fresh(manifest)
    with torch.no_grad():
        for name, param in earlier.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.02, generator=torch.Generator().manual_seed(1))
    earlier.save_pretrained(folder)
    base = AutoModelForCausalLM.from_pretrained(manifest.parent / "model")
    return PeftModel.from_pretrained(base, folder, is_trainable=True)


def test_a_warm_started_lora_is_refused_before_step_one(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = _lora_manifest(example)
    model = _warm(manifest, tmp_path / "earlier")
    trainer = tiny_trainer(manifest.parent, tmp_path / "out", [_guard(manifest)], model=model)
    err = refused(trainer)
    (row,) = [f for f in err.report.findings if f.rule == "drift.warm-start"]
    assert (row.kind, row.field, row.severity) == ("drift", "method.init", "error")
    assert row.path == str(manifest)
    assert "lora_B" in row.observed and "q_proj" in row.observed and "norm" in row.observed
    assert row.expected == "every lora_B zero (init: true starts from B = 0)"
    assert "get_peft_model" in row.hint and "new experiment" in row.hint


def test_a_fresh_lora_trains(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = _lora_manifest(example)
    trainer = tiny_trainer(manifest.parent, tmp_path / "out", [_guard(manifest)],
                           model=_fresh(manifest))  # fmt: skip
    trainer.train()
    assert trainer.state.global_step == 3


def test_resuming_the_runs_own_checkpoint_trains(example: Path, tmp_path: Path) -> None:  # noqa: F811
    """A resume starts from trained lora_B on purpose: the Trainer restored step 2."""
    manifest = _lora_manifest(example)
    out = tmp_path / "out"
    first = tiny_trainer(manifest.parent, out, [_guard(manifest)], model=_fresh(manifest),
                         save_strategy="steps", save_steps=2)  # fmt: skip
    first.train()
    checkpoint = out / "checkpoint-2"
    assert (checkpoint / "adapter_model.safetensors").is_file()
    again = tiny_trainer(manifest.parent, out, [_guard(manifest)], model=_fresh(manifest),
                         save_strategy="no")  # fmt: skip
    again.train(resume_from_checkpoint=str(checkpoint))
    assert again.state.global_step == 3


def test_a_flattening_collator_is_refused_unless_packing_is_pinned(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    trainer = tiny_trainer(example.parent, tmp_path / "out", [_guard(example)])
    trainer.data_collator = DataCollatorWithFlattening()
    err = refused(trainer)
    (row,) = [f for f in err.report.findings if f.rule == "drift.unpinned-option"]
    assert (row.field, row.severity) == ("training.packing.enabled", "error")
    assert "data_collator" in row.message and "DataCollatorWithFlattening" in row.observed
    assert row.expected == "not packed (training.packing.enabled: false)"
    assert "packing" in row.hint


def test_the_default_collator_trains(example: Path, tmp_path: Path) -> None:  # noqa: F811
    trainer = tiny_trainer(example.parent, tmp_path / "out", [_guard(example)])
    trainer.train()
    assert trainer.state.global_step == 3


@pytest.mark.parametrize("init", ["pissa", "false"])
def test_inits_that_start_b_elsewhere_are_not_judged(
    example: Path,  # noqa: F811
    tmp_path: Path,
    init: str,
) -> None:
    from ftmanifest.integrations.start_state import judge_start
    from ftmanifest.manifest import load_manifest

    manifest = _lora_manifest(example)
    model = _warm(manifest, tmp_path / "earlier")
    loaded = load_manifest(manifest).manifest
    (row,) = judge_start(model, loaded, "exp.yaml", resumed=False)  # control: init true
    assert row.rule == "drift.warm-start"
    text = manifest.read_text("utf-8").replace("alpha: 8\n", f"alpha: 8\n  init: {init}\n")
    manifest.write_text(text, "utf-8")
    assert judge_start(model, load_manifest(manifest).manifest, "exp.yaml", resumed=False) == []
    assert judge_start(model, loaded, "exp.yaml", resumed=True) == []


def test_a_flattening_collator_passes_where_packing_is_pinned(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    from ftmanifest.integrations.start_state import judge_start
    from ftmanifest.manifest import load_manifest

    trainer = tiny_trainer(example.parent, tmp_path / "out", [])
    trainer.data_collator = DataCollatorWithFlattening()
    loader = trainer.get_train_dataloader()
    (row,) = judge_start(None, load_manifest(example).manifest, "exp.yaml", resumed=False,
                         dataloader=loader)  # fmt: skip
    assert row.field == "training.packing.enabled"  # control: not pinned
    packed = "training:\n  packing: {enabled: true}\n"
    text = example.read_text("utf-8").replace("training:\n", packed)
    example.write_text(text, "utf-8")
    pinned = load_manifest(example).manifest
    assert pinned.training.packing.enabled
    assert judge_start(None, pinned, "exp.yaml", resumed=False, dataloader=loader) == []
