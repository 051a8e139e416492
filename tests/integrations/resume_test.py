"""A resume continues this manifest's own guarded run, nothing else.

A real ``transformers.Trainer`` with a real peft LoRA on the tiny example, on the CPU.
``train(resume_from_checkpoint=DIR)`` loads DIR's weights, optimizer and step before
``on_train_begin``: a checkpoint another run wrote (unguarded, or under another
manifest) or one edited since it was saved would be trained on as if it were this
run's.  The guard binds each checkpoint it saves (``ftmanifest-checkpoint.json``) and
refuses a resume whose checkpoint it did not bind, before the next step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.resume import BINDING, RULE
from ftmanifest.integrations.transformers import DriftRefusedError
from tests.integrations.start_state_test import _fresh, _guard, _lora_manifest
from tests.integrations.trainer_guard_test import example, locked  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


def _first_run(manifest: Path, out: Path, guarded: bool = True, under: Path | None = None) -> Path:
    """Two steps of a run that saves ``checkpoint-2`` (guarded by ``under``'s manifest)."""
    callbacks = [_guard(under or manifest)] if guarded else []
    first = tiny_trainer(manifest.parent, out, callbacks, model=_fresh(manifest),
                         manifest=under, save_strategy="steps", save_steps=2)  # fmt: skip
    first.train()
    return out / "checkpoint-2"


def _resume(manifest: Path, out: Path, checkpoint: Path) -> Any:
    again = tiny_trainer(manifest.parent, out, [_guard(manifest)], model=_fresh(manifest),
                         save_strategy="no")  # fmt: skip
    again.train(resume_from_checkpoint=str(checkpoint))
    return again


def _refused(manifest: Path, out: Path, checkpoint: Path) -> Any:
    again = tiny_trainer(manifest.parent, out, [_guard(manifest)], model=_fresh(manifest),
                         save_strategy="no")  # fmt: skip
    with pytest.raises(DriftRefusedError) as err:
        again.train(resume_from_checkpoint=str(checkpoint))
    assert again.state.global_step == 2  # the checkpoint's step: no step taken after it
    (row,) = [f for f in err.value.report.findings if f.rule == RULE]
    assert (row.kind, row.severity) == ("drift", "error")
    assert str(checkpoint) in row.observed and row.path == str(manifest)
    assert err.value.report.manifest_digest in row.expected
    return row


def test_resuming_a_checkpoint_no_guard_wrote_is_refused(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = _lora_manifest(example)
    foreign = _first_run(manifest, tmp_path / "other", guarded=False)
    assert (foreign / "adapter_model.safetensors").is_file() and not (foreign / BINDING).exists()
    row = _refused(manifest, tmp_path / "out", foreign)
    assert "no binding" in row.observed
    assert "resume_from_checkpoint" in row.hint and "init_adapter" in row.hint


def test_resuming_another_manifests_checkpoint_is_refused(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = _lora_manifest(example)
    other = manifest.with_name("other.yaml")
    text = manifest.read_text("utf-8").replace("routes the example", "routes the sample")
    other.write_text(text, "utf-8")
    foreign = _first_run(manifest, tmp_path / "other", under=other)
    bound = json.loads((foreign / BINDING).read_text("utf-8"))["manifest_digest"]
    row = _refused(manifest, tmp_path / "out", foreign)
    assert bound in row.observed and "another manifest" in row.message


def test_resuming_an_edited_checkpoint_is_refused(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = _lora_manifest(example)
    checkpoint = _first_run(manifest, tmp_path / "out")
    weights = checkpoint / "adapter_model.safetensors"
    tensors = {k: v * 2 if "lora_B" in k else v for k, v in load_file(weights).items()}
    save_file(tensors, weights, metadata={"format": "pt"})
    row = _refused(manifest, tmp_path / "out", checkpoint)
    assert "adapter_model.safetensors" in row.observed and "changed" in row.observed


def test_a_checkpoint_with_an_added_file_is_refused(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = _lora_manifest(example)
    checkpoint = _first_run(manifest, tmp_path / "out")
    torch.save({"x": torch.zeros(1)}, checkpoint / "extra.bin")
    row = _refused(manifest, tmp_path / "out", checkpoint)
    assert "extra.bin" in row.observed


def test_resuming_the_runs_own_checkpoint_trains(example: Path, tmp_path: Path) -> None:  # noqa: F811
    """The ordinary case: the run's own checkpoint, resumed after an interruption."""
    manifest = _lora_manifest(example)
    out = tmp_path / "out"
    checkpoint = _first_run(manifest, out)
    binding = json.loads((checkpoint / BINDING).read_text("utf-8"))
    assert binding["global_step"] == 2 and "adapter_model.safetensors" in binding["files"]
    again = _resume(manifest, out, checkpoint)
    assert again.state.global_step == 3
    record = json.loads((out / "ftmanifest-run.json").read_text("utf-8"))
    assert record["recipe"]["resume"]["checkpoint"] == str(checkpoint)
    assert record["recipe"]["resume"]["bound"] is True
