"""The guard compares the recipe the Trainer really runs with the manifest.

A real ``transformers.Trainer`` on the tiny example, on the CPU.  Each test
changes one thing the way a training script would (an argument, the
optimizer object, the data's loss mask, the model's config) and the run must
be refused before its first optimizer step, naming the manifest field; the
arguments built from the manifest (``training_arguments``) must train.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

from ftmanifest.errors import UsageError
from ftmanifest.examples.tiny import lm_examples
from ftmanifest.examples.training import own_arguments, tiny_trainer
from ftmanifest.integrations.transformers import (
    RUN_RECORD,
    DriftRefusedError,
    FtManifestCallback,
    load_pinned,
    training_arguments,
)
from tests.integrations.trainer_guard_test import _weights, refused

QUIET = {"report_to": [], "save_strategy": "no", "disable_tqdm": True, "logging_strategy": "no"}


def _trainer(manifest: Path, out: Path, **kw: Any) -> tuple[Trainer, FtManifestCallback]:
    guard = FtManifestCallback(manifest, signature=False)
    return tiny_trainer(manifest.parent, out, [guard], **kw), guard


def own_args(manifest: Path, out: Path, **changes: Any) -> Any:
    return own_arguments(manifest, out, **changes)


def fields(err: DriftRefusedError) -> set[str]:
    return {f.field for f in err.report.findings if f.field}


def test_the_manifest_recipe_trains_and_records_its_arguments(
    example: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    trainer, guard = _trainer(example, out)
    trainer.train()
    assert trainer.state.global_step == 3
    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    recipe = record["recipe"]
    assert recipe["arguments"]["seed"] == 0 and recipe["arguments"]["max_steps"] == 3
    assert recipe["arguments"]["__class__"].endswith("TrainingArguments")
    assert recipe["arguments_digest"].startswith("sha256:")
    assert recipe["objective"] == "trainer"
    assert recipe["first_batch"] == {"judged": True, "why_not": None}
    assert recipe["optimizer"] == "torch.optim.adamw.AdamW"
    assert any(n["field"] == "training.loss_normalization" for n in recipe["not_compared"])


# (TrainingArguments field, value a script sets, the manifest field named)
ONE_CHANGE = [
    ("seed", 42, "seeds.torch"),
    ("data_seed", 7, "seeds.data_order"),
    ("per_device_train_batch_size", 8, "training.micro_batch"),
    ("gradient_accumulation_steps", 2, "training.grad_accum"),
    ("max_steps", 5, "training.max_steps"),
    ("learning_rate", 5e-5, "training.optimizer.lr"),
    ("weight_decay", 0.1, "training.optimizer.weight_decay"),
    ("lr_scheduler_type", "cosine", "training.optimizer.schedule"),
    ("warmup_steps", 1, "training.optimizer.warmup_steps"),
    ("optim", "sgd", "training.optimizer.name"),
]


@pytest.mark.parametrize(("name", "value", "field"), ONE_CHANGE, ids=[c[0] for c in ONE_CHANGE])
def test_one_changed_argument_is_refused_before_step_one(
    example: Path, tmp_path: Path, name: str, value: Any, field: str | None
) -> None:
    args = own_args(example, tmp_path / "out", **{name: value})
    trainer, _ = _trainer(example, tmp_path / "out", args=args)
    if field is None:
        trainer.train()
        assert trainer.state.global_step == 3
        return
    err = refused(trainer)
    assert field in fields(err), fields(err)
    row = next(f for f in err.report.findings if f.field == field)
    assert name in str(row.observed) and str(row.expected)
    assert "training_arguments" in (row.hint or "")


def test_bf16_and_checkpointing_against_an_fp32_manifest(example: Path, tmp_path: Path) -> None:
    args = own_args(example, tmp_path / "out", bf16=True, activation_checkpointing=True)
    trainer, _ = _trainer(example, tmp_path / "out", args=args)
    err = refused(trainer)
    assert {"training.precision", "training.activation_checkpointing"} <= fields(err)


def test_an_optimizer_object_of_its_own_is_refused(example: Path, tmp_path: Path) -> None:
    """The arguments say adamw_torch at 1e-2; the script hands the Trainer an SGD."""
    trainer, _ = _trainer(example, tmp_path / "out")
    trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=1e-2)
    err = refused(trainer)
    row = next(f for f in err.report.findings if f.field == "training.optimizer.name")
    assert "SGD" in str(row.observed) and "AdamW" in str(row.expected)


def test_a_learning_rate_hidden_in_the_optimizer_object_is_refused(
    example: Path, tmp_path: Path
) -> None:
    trainer, _ = _trainer(example, tmp_path / "out")
    trainer.optimizer = torch.optim.AdamW(trainer.model.parameters(), lr=3e-4)
    err = refused(trainer)
    assert "training.optimizer.lr" in fields(err)


def test_determinism_switched_off_is_refused(example: Path, tmp_path: Path) -> None:
    args = own_args(example, tmp_path / "out", full_determinism=False)
    torch.use_deterministic_algorithms(False)
    trainer, _ = _trainer(example, tmp_path / "out", args=args)
    err = refused(trainer)
    assert "seeds.deterministic" in fields(err)


def test_loss_on_every_token_under_loss_on_completion_is_refused(
    example: Path, tmp_path: Path
) -> None:
    trainer, _ = _trainer(example, tmp_path / "out")
    tok = AutoTokenizer.from_pretrained(example.parent / "model")
    trainer.train_dataset = lm_examples(example.parent / "data" / "train.jsonl", tok,
                                        seq_len=32, loss_on="all")  # fmt: skip
    err = refused(trainer)
    row = next(f for f in err.report.findings if f.field == "training.loss_on")
    assert "every token" in row.message and row.rule == "drift.first-batch"


def test_a_batch_longer_than_seq_len_is_refused(example: Path, tmp_path: Path) -> None:
    trainer, _ = _trainer(example, tmp_path / "out")
    tok = AutoTokenizer.from_pretrained(example.parent / "model")
    trainer.train_dataset = lm_examples(example.parent / "data" / "train.jsonl", tok, seq_len=48)
    err = refused(trainer)
    row = next(f for f in err.report.findings if f.field == "training.seq_len")
    assert "48" in str(row.observed) and "32" in str(row.expected)


def test_a_target_truncated_away_is_refused(example: Path, tmp_path: Path) -> None:
    trainer, _ = _trainer(example, tmp_path / "out")
    tok = AutoTokenizer.from_pretrained(example.parent / "model")
    rows = lm_examples(example.parent / "data" / "train.jsonl", tok, seq_len=32)
    for row in rows:  # the label cut off: every position without loss
        row["labels"] = [-100] * len(row["labels"])
    trainer.train_dataset = rows
    err = refused(trainer)
    assert any("no target" in f.message for f in err.report.findings)


def test_peeking_at_the_first_batch_changes_no_random_draw(example: Path, tmp_path: Path) -> None:
    """Two guarded runs and the same seeds: identical weights after training."""
    results = []
    for run in ("a", "b"):
        trainer, _ = _trainer(example, tmp_path / run)
        trainer.train()
        results.append(_weights(trainer))
    assert all(torch.equal(results[0][k], results[1][k]) for k in results[0])


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"rms_norm_eps": 0.5}, "model.config.rms_norm_eps"),
        ({"hidden_act": "relu"}, "model.config.hidden_act"),
    ],  # fmt: skip
)
def test_a_loaded_config_override_is_refused(
    example: Path, tmp_path: Path, override: dict[str, Any], field: str
) -> None:
    with pytest.raises(UsageError) as err:
        load_pinned(example, **override)
    assert err.value.field == field and err.value.exit_code == 2
    model = AutoModelForCausalLM.from_pretrained(example.parent / "model", **override)
    trainer, _ = _trainer(example, tmp_path / "out", model=model)
    assert field in fields(refused(trainer))


def test_another_attention_kernel_than_the_pinned_one_is_refused(
    example: Path, tmp_path: Path
) -> None:
    text = example.read_text("utf-8").replace(
        "  license: apache-2.0\n", "  license: apache-2.0\n  attn_implementation: sdpa\n"
    )
    example.write_text(text, "utf-8")
    with pytest.raises(UsageError) as err:
        load_pinned(example, attn_implementation="eager")
    assert err.value.field == "model.attn_implementation"
    model, _ = load_pinned(example)
    assert model.config._attn_implementation == "sdpa"
    eager = AutoModelForCausalLM.from_pretrained(example.parent / "model",
                                                 attn_implementation="eager")  # fmt: skip
    trainer, _ = _trainer(example, tmp_path / "out", model=eager)
    assert "model.attn_implementation" in fields(refused(trainer))


def test_a_half_precision_model_under_fp32_is_refused(example: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        load_pinned(example, dtype=torch.float16)
    assert err.value.field == "training.precision"
    model = AutoModelForCausalLM.from_pretrained(example.parent / "model", dtype=torch.float16)
    trainer, _ = _trainer(example, tmp_path / "out", model=model)
    assert "training.precision" in fields(refused(trainer))


def test_builders_refuse_an_override_of_a_pinned_value(example: Path) -> None:
    with pytest.raises(UsageError) as err:
        training_arguments(example, seed=42)
    assert err.value.field == "seeds.torch"
    assert err.value.expected == "0" and "seed=42" in str(err.value.observed)
    args = training_arguments(example, seed=0, output_dir="elsewhere", logging_steps=7)
    assert args.seed == 0 and args.logging_steps == 7


def test_a_lora_of_another_rank_is_refused_before_step_one(example: Path, tmp_path: Path) -> None:
    """A LoRA r=8 under a manifest of r=4 was noticed only when the first
    checkpoint was bound, two steps in; the one built by lora_config trains."""
    from peft import LoraConfig, get_peft_model

    from ftmanifest.integrations.transformers import lora_config

    lora = "method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj, v_proj]\n"
    example.write_text(example.read_text("utf-8").replace("method:\n  kind: full\n", lora))
    base = example.parent / "model"
    built = get_peft_model(AutoModelForCausalLM.from_pretrained(base), lora_config(example))
    trainer, _ = _trainer(example, tmp_path / "ok", model=built)
    trainer.train()
    assert trainer.state.global_step == 3
    other = LoraConfig(r=8, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    wider = get_peft_model(AutoModelForCausalLM.from_pretrained(base), other)
    trainer, _ = _trainer(example, tmp_path / "no", model=wider)
    err = refused(trainer)
    row = next(f for f in err.report.findings if f.field == "method.r")
    assert (row.expected, row.observed) == ("4", "8")


@pytest.mark.parametrize("change", ["norm eps", "activation", "attention scaling"])
def test_a_module_changed_after_loading_is_refused(
    example: Path, tmp_path: Path, change: str
) -> None:
    """The config still reads as pinned, the weights are the pinned ones, and the
    model computes something else: the modules are compared with what the pinned
    config builds."""
    model, _ = load_pinned(example, tokenizer=False)
    inputs = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        before = model(inputs).logits
    if change == "norm eps":
        model.model.norm.variance_epsilon, name = 0.5, "model.norm"
    elif change == "activation":
        model.model.layers[0].mlp.act_fn, name = torch.nn.ReLU(), "model.layers.0.mlp.act_fn"
    else:
        model.model.layers[1].self_attn.scaling, name = 1.0, "model.layers.1.self_attn"
    with torch.no_grad():  # the change is real: the logits move
        assert not torch.allclose(before, model(inputs).logits)
    trainer, _ = _trainer(example, tmp_path / "out", model=model)
    err = refused(trainer)
    row = next(f for f in err.report.findings if f.field == f"model.modules.{name}")
    assert row.rule == "drift.model-config" and row.expected != row.observed


def test_a_declared_layer_replication_is_what_the_config_judge_expects(example: Path) -> None:
    from peft import LoraConfig, get_peft_model

    from ftmanifest.integrations.model_config import judge_config
    from ftmanifest.manifest import load_manifest

    lora = ("method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj]\n"
            "  layer_replication: [[0, 2], [1, 2]]\n")  # fmt: skip
    example.write_text(example.read_text("utf-8").replace("method:\n  kind: full\n", lora))
    manifest = load_manifest(example).manifest
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"],
                        layer_replication=[(0, 2), (1, 2)])  # fmt: skip
    base = example.parent / "model"
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), config).get_base_model()
    assert model.config.num_hidden_layers == 3
    assert judge_config(model, base, manifest, str(example)) == []
    other = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"], layer_replication=[(0, 2)])
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), other).get_base_model()
    rows = judge_config(model, base, manifest, str(example))
    assert [r.field for r in rows] == ["model.config.num_hidden_layers"]


def test_run_time_state_of_the_modules_is_not_a_difference(example: Path) -> None:
    """Train/eval mode, checkpointing and a rope cache grown by a long sequence
    are state, not another computation."""
    from ftmanifest.integrations.model_config import judge_config
    from ftmanifest.manifest import load_manifest

    model, _ = load_pinned(example, tokenizer=False)
    model.train()
    model.gradient_checkpointing_enable()
    model.model.rotary_emb.max_seq_len_cached = 10_000
    manifest = load_manifest(example).manifest
    assert judge_config(model, example.parent / "model", manifest, str(example)) == []
    model.model.rotary_emb.attention_scaling = 2.0  # this one changes the logits
    (row,) = judge_config(model, example.parent / "model", manifest, str(example))
    assert row.field == "model.modules.model.rotary_emb"
