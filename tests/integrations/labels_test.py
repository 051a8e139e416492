"""Every training batch keeps the pinned loss positions, not the first one only.

A real ``transformers.Trainer`` on the tiny example (``loss_on: completion``), on the
CPU.  The first batch is judged before step 1; a collator that a callback switches
after step 1 to the causal-LM labels (loss on the prompt too) was never seen.  The
guard's forward pre-hook refuses the first batch that puts loss on the prompt, before
its optimizer step; the same collator left alone trains every step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import TrainerCallback, default_data_collator

from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.transformers import RUN_RECORD, FtManifestCallback, StepRefusedError
from tests.integrations.trainer_guard_test import example, locked  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


class Switch(TrainerCallback):
    """After optimizer step ``at``, the collator labels every real token (as
    ``DataCollatorForLanguageModeling(mlm=False)`` does)."""

    def __init__(self, at: int | None) -> None:
        self.at, self.on = at, False

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.at is not None and state.global_step >= self.at:
            self.on = True

    def collate(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = default_data_collator(features)
        if self.on:
            batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        return batch


def _trainer(manifest: Path, out: Path, switch: Switch) -> Any:
    guard = FtManifestCallback(manifest, signature=False)
    trainer = tiny_trainer(manifest.parent, out, [guard, switch])
    trainer.data_collator = switch.collate
    return trainer


def test_loss_on_the_prompt_after_step_one_is_refused_at_that_step(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    trainer = _trainer(example, out, Switch(at=1))
    with pytest.raises(StepRefusedError) as caught:
        trainer.train()
    err = caught.value
    assert 1 <= trainer.state.global_step < 3  # it trained, then stopped mid-run
    assert err.step == trainer.state.global_step + 1
    (row,) = err.report.findings
    assert (row.kind, row.rule, row.field, row.severity) == (
        "drift", "drift.loss-mask", "training.loss_on", "error",
    )  # fmt: skip
    assert row.path == str(example)
    assert row.expected == "completion: the first token of every sequence carries no loss"
    assert "sequence 0" in row.observed and "carries loss" in row.observed
    assert "collator" in row.hint
    assert "loss" in err.hint and "learning rate" not in err.hint
    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    assert record["status"] == "failed"
    assert record["findings"][0]["rule"] == "drift.loss-mask"


def test_the_same_collator_left_alone_trains_every_step(example: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    trainer = _trainer(example, out, Switch(at=None))
    trainer.train()
    assert trainer.state.global_step == 3
    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    assert record["loss_mask"]["judged"] == 3 and record["loss_mask"]["loss_on"] == "completion"


def test_evaluation_and_no_grad_forwards_are_not_judged(example: Path, tmp_path: Path) -> None:  # noqa: F811
    from ftmanifest.integrations.labels import LabelGuard

    trainer = tiny_trainer(example.parent, tmp_path / "out", [])
    model = trainer.model
    seen: list[Any] = []
    record: dict[str, Any] = {}
    guard = LabelGuard(model, "completion", "exp.yaml", seen.append, record)
    ids = torch.tensor([[5, 6, 7, 8]])
    full = {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids)}
    model.eval()
    model(**full)
    model.train()
    with torch.no_grad():
        model(**full)
    assert seen == []
    model(**full)
    guard.remove()
    (rows,) = seen
    assert rows[0].rule == "drift.loss-mask"
    assert record["loss_mask"]["judged"] == 1


def test_the_documented_sft_path_is_judged_and_trains_every_step(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    pytest.importorskip("trl", reason="TRL is a test extra: pip install -e '.[dev]'")
    from ftmanifest.integrations.transformers import sft_config
    from tests.integrations.trl_test import QUIET, _sft

    out = tmp_path / "o"
    trainer = _sft(example, sft_config(example, output_dir=str(out), **QUIET))
    trainer.train()
    assert trainer.state.global_step == 3
    (guard,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, FtManifestCallback)]
    assert guard.record is not None
    assert guard.record["loss_mask"] == {"loss_on": "completion", "judged": 3, "not_judged": 0}
