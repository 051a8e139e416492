"""Every Trainer option that changes training is pinned and compared, or refused.

The judge is the guard's own (``judge_arguments`` on the real arguments'
``to_dict`` against the class's real defaults), called as ``on_train_begin``
calls it, so each case costs milliseconds; two real ``Trainer`` runs show the
refusal stopping training before step 1 and the neutral options training.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.examples.training import own_arguments, tiny_trainer
from ftmanifest.integrations.builders import dpo_config, sft_config
from ftmanifest.integrations.options import NEUTRAL
from ftmanifest.integrations.recipe import argument_defaults, effective_arguments, judge_arguments
from ftmanifest.integrations.transformers import FtManifestCallback, training_arguments
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.model import Manifest
from tests.integrations.trainer_guard_test import example, locked, refused  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
RULE = "drift.unpinned-option"
DPO = "  objective: {kind: dpo, beta: 0.1}\n"
NEUTRAL_SET = {
    "logging_steps": 2, "logging_strategy": "steps", "report_to": [], "run_name": "mine",
    "save_steps": 7, "save_total_limit": 1, "eval_strategy": "no", "disable_tqdm": True,
    "dataloader_num_workers": 0, "dataloader_pin_memory": False, "log_level": "warning",
    "logging_first_step": True, "include_num_input_tokens_seen": "all",
    "remove_unused_columns": False, "per_device_eval_batch_size": 2, "skip_memory_metrics": False,
}  # fmt: skip


def _loose(manifest: Manifest) -> Manifest:
    """The example with no optimizer and no grad_accum pinned."""
    training = manifest.training.model_copy(update={"optimizer": None, "grad_accum": None})
    return manifest.model_copy(update={"training": training})


def _judge(manifest: Manifest, args: Any) -> list[Any]:
    data, _digest = effective_arguments(args)
    return judge_arguments(manifest, data, "exp.yaml", argument_defaults(args)).rows


# (field, value, the manifest field the row names)
TRAINER = [
    ("max_grad_norm", 0.5, "training.max_grad_norm"),
    ("label_smoothing_factor", 0.1, "training.options.label_smoothing_factor"),
    ("train_sampling_strategy", "group_by_length", "training.options.train_sampling_strategy"),
    ("optim_args", "momentum=0.5", "training.options.optim_args"),
    ("adam_beta1", 0.5, "training.optimizer.betas"),
    ("adam_beta2", 0.95, "training.optimizer.betas"),
    ("adam_epsilon", 1e-6, "training.optimizer.eps"),
    ("lr_scheduler_kwargs", {"power": 2.0}, "training.options.lr_scheduler_kwargs"),
    ("neftune_noise_alpha", 5.0, "training.options.neftune_noise_alpha"),
    ("torch_compile", True, "training.options.torch_compile"),
    ("dataloader_drop_last", True, "training.options.dataloader_drop_last"),
    ("load_best_model_at_end", True, "training.options.load_best_model_at_end"),
]
LOOSE = [
    ("weight_decay", 0.1, "training.optimizer.weight_decay"),
    ("gradient_accumulation_steps", 4, "training.grad_accum"),
    ("optim", "sgd", "training.optimizer.name"),
]


@pytest.mark.parametrize(("name", "value", "where"), TRAINER + LOOSE,
                         ids=[c[0] for c in TRAINER + LOOSE])  # fmt: skip
def test_an_unpinned_option_is_refused_naming_field_value_and_fix(
    example: Path,  # noqa: F811
    tmp_path: Path,
    name: str,
    value: Any,
    where: str,
) -> None:
    manifest, base = load_manifest(example).manifest, {}
    if (name, value, where) in LOOSE:  # the defaults where the manifest pins nothing
        manifest, base = _loose(manifest), {"learning_rate": 5e-5, "optim": "adamw_torch_fused"}
    assert _judge(manifest, own_arguments(example, tmp_path, **base)) == []  # control
    rows = _judge(manifest, own_arguments(example, tmp_path, **{**base, name: value}))
    assert {r.rule for r in rows} == {RULE}  # torch_compile also sets its backend
    row = next(r for r in rows if r.observed.endswith(f"({name})"))
    assert (row.rule, row.field, row.severity) == (RULE, where, "error")
    assert row.observed == f"{json.dumps(value)} ({name})"
    assert "pin it" in row.hint and f"leave {name} at its default" in row.hint


@pytest.mark.parametrize(
    ("builder", "objective", "changes", "name"),
    [
        (sft_config, "", {"loss_type": "dft"}, "objective.loss_type"),
        (sft_config, "", {"padding_free": True}, "options.padding_free"),
        (dpo_config, DPO, {"loss_type": ["ipo"]}, "objective.loss_type"),
        (dpo_config, DPO, {"use_weighting": True}, "options.use_weighting"),
        (dpo_config, DPO, {"label_smoothing": 0.2}, "options.label_smoothing"),
    ],  # fmt: skip
)
def test_trl_options_that_change_the_loss_are_refused_unless_pinned(
    example: Path,  # noqa: F811
    tmp_path: Path,
    builder: Any,
    objective: str,
    changes: dict[str, Any],
    name: str,
) -> None:
    text = example.read_text("utf-8").replace("training:\n", "training:\n" + objective)
    example.write_text(text, "utf-8")
    manifest = load_manifest(example).manifest
    quiet = {"output_dir": str(tmp_path), "use_cpu": True, "report_to": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _judge(manifest, builder(example, **quiet)) == []  # control: as the builder makes
        rows = _judge(manifest, builder(example, **quiet, **changes))
    assert [(r.rule, r.field) for r in rows] == [(RULE, f"training.{name}")]


def test_packing_and_beta_have_their_own_fields(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = load_manifest(example).manifest
    quiet = {"output_dir": str(tmp_path), "use_cpu": True, "report_to": []}
    args = sft_config(example, **quiet)
    args.packing = True  # as a script sets it (the builder refuses the keyword)
    rows = _judge(manifest, args)
    assert [(r.rule, r.field) for r in rows] == [("drift.recipe", "training.packing.enabled")]
    dpo = "training:\n  objective: {kind: dpo, beta: 0.1}\n"
    example.write_text(example.read_text("utf-8").replace("training:\n", dpo), "utf-8")
    manifest = load_manifest(example).manifest
    args = dpo_config(example, **quiet)
    args.beta = 0.5
    rows = _judge(manifest, args)
    assert [(r.rule, r.field) for r in rows] == [("drift.recipe", "training.objective.beta")]


def test_options_pinned_in_the_manifest_are_built_and_compared_exactly(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    pin = "training:\n  options: {label_smoothing_factor: 0.1, neftune_noise_alpha: 5.0}\n"
    example.write_text(example.read_text("utf-8").replace("training:\n", pin), "utf-8")
    manifest = load_manifest(example).manifest
    built = training_arguments(example, output_dir=str(tmp_path), use_cpu=True, report_to=[])
    assert built.label_smoothing_factor == 0.1 and built.neftune_noise_alpha == 5.0
    assert _judge(manifest, built) == []
    rows = _judge(manifest, own_arguments(example, tmp_path, label_smoothing_factor=0.2))
    (row,) = rows
    assert (row.rule, row.field) == ("drift.recipe", "training.options.label_smoothing_factor")
    assert (row.expected, row.observed) == ("0.1", "0.2 (label_smoothing_factor)")


def test_an_option_with_its_own_field_or_no_such_field_is_refused(example: Path) -> None:  # noqa: F811
    pin = "training:\n  options: {max_grad_norm: 1.0, use_weighting: true}\n"
    example.write_text(example.read_text("utf-8").replace("training:\n", pin), "utf-8")
    manifest = load_manifest(example).manifest
    args = own_arguments(example, example.parent / "out")
    rows = {r.field: r for r in _judge(manifest, args)}
    assert rows["training.options.max_grad_norm"].hint == "move it to training.max_grad_norm"
    assert "no field use_weighting" in rows["training.options.use_weighting"].message


def test_neutral_options_are_not_judged(example: Path, tmp_path: Path) -> None:  # noqa: F811
    assert set(NEUTRAL_SET) <= NEUTRAL
    manifest = load_manifest(example).manifest
    assert _judge(manifest, own_arguments(example, tmp_path, **NEUTRAL_SET)) == []


def test_a_trainer_with_many_neutral_options_trains(example: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    args = own_arguments(example, out, **NEUTRAL_SET)
    trainer = tiny_trainer(example.parent, out, [FtManifestCallback(example, signature=False)],
                           args=args)  # fmt: skip
    trainer.train()
    assert trainer.state.global_step == 3


def test_a_trainer_with_an_unpinned_option_is_refused_before_step_one(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    args = own_arguments(example, out, label_smoothing_factor=0.1)
    trainer = tiny_trainer(example.parent, out, [FtManifestCallback(example, signature=False)],
                           args=args)  # fmt: skip
    err = refused(trainer)
    (row,) = [f for f in err.report.findings if f.rule == RULE]
    assert row.field == "training.options.label_smoothing_factor"
