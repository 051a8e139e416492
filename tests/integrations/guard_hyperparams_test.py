"""Over the whole run: the optimizer's hyper-parameters and the trainable set hold.

A real ``transformers.Trainer`` on the tiny example, on the CPU.  A callback
that changes weight decay, or unfreezes a parameter, before optimizer step 2
must stop training before that step; the manifest's own run trains every step
(``guard_over_the_run_test`` shows the learning rate held the same way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers import Trainer, TrainerCallback

from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.transformers import FtManifestCallback, StepRefusedError
from tests.integrations.trainer_guard_test import example, locked  # noqa: F401


class AtStep2(TrainerCallback):  # type: ignore[misc]
    """Runs ``change(model, optimizer)`` at ``on_step_begin`` of optimizer step 2."""

    def __init__(self, change: Any) -> None:
        self.change = change

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step + 1 == 2:
            self.change(kw["model"], kw["optimizer"])


def _weight_decay(model: Any, optimizer: Any) -> None:
    optimizer.param_groups[0]["weight_decay"] = 0.5


def _betas(model: Any, optimizer: Any) -> None:
    optimizer.param_groups[1]["betas"] = (0.5, 0.999)


def _freeze_then_unfreeze(model: Any, optimizer: Any) -> None:
    model.model.embed_tokens.weight.requires_grad_(True)


def _frozen(manifest: Path) -> None:
    """The manifest keeps the embeddings frozen (what the model starts with)."""
    text = manifest.read_text("utf-8").replace(
        "method:\n  kind: full\n", "method:\n  kind: full\n  frozen_modules: [model.embed_tokens]\n"
    )
    manifest.write_text(text, "utf-8")


def _trainer(manifest: Path, out: Path, *extra: Any) -> Trainer:
    guard = FtManifestCallback(manifest, signature=False)
    trainer: Trainer = tiny_trainer(manifest.parent, out, [guard, *extra])
    return trainer


@pytest.mark.parametrize(
    ("change", "field", "observed"),
    [
        (_weight_decay, "training.optimizer.weight_decay", "group 0: 0.5"),
        (_betas, "training.optimizer.betas", "group 1: (0.5, 0.999)"),
    ],
)
def test_a_hyper_parameter_changed_mid_run_stops_before_that_step(
    example: Path,  # noqa: F811
    tmp_path: Path,
    change: Any,
    field: str,
    observed: str,
) -> None:
    trainer = _trainer(example, tmp_path / "out", AtStep2(change))
    with pytest.raises(StepRefusedError) as err:
        trainer.train()
    assert err.value.step == 2 and trainer.state.global_step == 1
    (row,) = err.value.findings
    assert (row.field, row.rule) == (field, "drift.optimizer-step")
    assert row.observed.startswith(observed) and "at train begin" in row.expected


def test_a_parameter_unfrozen_mid_run_stops_before_that_step(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    _frozen(example)
    trainer = _trainer(example, tmp_path / "out", AtStep2(_freeze_then_unfreeze))
    trainer.model.model.embed_tokens.weight.requires_grad_(False)  # frozen from the start
    with pytest.raises(StepRefusedError) as err:
        trainer.train()
    assert err.value.step == 2 and trainer.state.global_step == 1
    (row,) = err.value.findings
    assert (row.field, row.rule) == ("method", "drift.optimizer-step")
    assert "model.embed_tokens.weight (trains)" in row.observed


def test_a_frozen_parameter_that_stays_frozen_trains_every_step(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Control: the same frozen start, nothing changed mid-run."""
    _frozen(example)
    trainer = _trainer(example, tmp_path / "out")
    trainer.model.model.embed_tokens.weight.requires_grad_(False)
    trainer.train()
    assert trainer.state.global_step == 3
