"""The guard holds the learning rate of every optimizer step to the pinned schedule.

A real ``transformers.Trainer`` on the tiny example (linear schedule, lr
0.01, no warm-up, 3 steps), on the CPU.  A callback that writes another
learning rate into the optimizer in the middle of the run must stop it before
that step, naming the step, the expected and the observed rate; per-group
rates the manifest cannot describe (peft's LoRA+) are refused before step 1;
the manifest's own run trains every step, each one checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import Trainer, TrainerCallback

from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.transformers import (
    RUN_RECORD,
    FtManifestCallback,
    StepRefusedError,
)
from tests.integrations.trainer_guard_test import example, locked, refused  # noqa: F401

LORA = "method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj, v_proj]\n"


class SetLr(TrainerCallback):  # type: ignore[misc]
    """Writes ``lr`` into every param group at ``event`` of optimizer step ``step``."""

    def __init__(self, event: str, step: int, lr: float) -> None:
        self.event, self.step, self.lr = event, step, lr
        setattr(self, event, self._set)

    def _set(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step + 1 == self.step:
            for group in kw["optimizer"].param_groups:
                group["lr"] = self.lr


def _trainer(manifest: Path, out: Path, *extra: Any) -> tuple[Trainer, FtManifestCallback]:
    guard = FtManifestCallback(manifest, signature=False)
    trainer: Trainer = tiny_trainer(manifest.parent, out, [guard, *extra])
    return trainer, guard


def test_the_pinned_schedule_trains_with_every_step_checked(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    seen: list[float] = []

    class Watch(TrainerCallback):  # type: ignore[misc]
        def on_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            seen.append(kw["optimizer"].param_groups[0]["lr"])

    trainer, guard = _trainer(example, tmp_path / "out", Watch())
    trainer.train()
    assert trainer.state.global_step == 3
    assert seen == pytest.approx([0.01, 0.01 * 2 / 3, 0.01 / 3])  # linear, 3 steps, lr 0.01
    record = json.loads((tmp_path / "out" / RUN_RECORD).read_text("utf-8"))
    assert record["recipe"]["lr_schedule"] == {
        "compared": True,
        "why_not": None,
        "hooked": True,
        "steps_checked": 3,
    }


@pytest.mark.parametrize("event", ["on_step_begin", "on_pre_optimizer_step"])
def test_a_learning_rate_written_mid_run_stops_before_that_step(
    example: Path,  # noqa: F811
    tmp_path: Path,
    event: str,
) -> None:
    """The callback runs after the guard's own hooks: only a check inside
    ``optimizer.step`` sees the rate the step applies."""
    out = tmp_path / "out"
    trainer, _ = _trainer(example, out, SetLr(event, 2, 0.5))
    with pytest.raises(StepRefusedError) as err:
        trainer.train()
    assert err.value.step == 2 and trainer.state.global_step == 1  # step 2 never ran
    assert str(err.value).startswith("training stopped before optimizer step 2")
    (row,) = err.value.findings
    assert row.field == "training.optimizer.schedule" and row.rule == "drift.lr-schedule"
    assert row.expected == "group 0: 0.00666667, group 1: 0.00666667"
    assert row.observed.startswith("group 0: 0.5 (optimizer.param_groups[0]['lr'])")
    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    assert record["status"] == "failed" and record["final_global_step"] == 1
    assert [f["field"] for f in record["findings"]] == ["training.optimizer.schedule"]


def test_per_group_rates_of_lora_plus_are_refused_before_step_1(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """LoRA+ trains B at 16x the rate: one lr in the manifest cannot describe it.
    (A LoRA under the Trainer's own optimizer trains: trainer_recipe_test.)"""
    from peft import get_peft_model
    from peft.optimizers import create_loraplus_optimizer
    from transformers import AutoModelForCausalLM

    from ftmanifest.integrations.transformers import lora_config

    example.write_text(example.read_text("utf-8").replace("method:\n  kind: full\n", LORA))
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(example.parent / "model"), lora_config(example)
    )
    trainer, _ = _trainer(example, tmp_path / "out")
    trainer.model = model
    trainer.optimizer = create_loraplus_optimizer(
        model, optimizer_cls=torch.optim.AdamW, lr=0.01, loraplus_lr_ratio=16.0
    )
    err = refused(trainer)
    (row,) = [f for f in err.report.findings if f.field == "training.optimizer.lr"]
    assert row.expected == "0.01" and "0.16" in row.observed and "group" in row.observed
