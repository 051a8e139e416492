"""The guard judges every pinned field that changes the forward pass, before step 1.

A real ``transformers.Trainer`` (and peft) on the tiny example, on the CPU:
the attention kernel ``environment.attn_implementation`` pins, the dtype of
every floating parameter (frozen base weights under a LoRA included) against
``training.precision``, and the tokenizer handed to the Trainer against the
pinned snapshot's (chat template, special tokens, added tokens).  Each attack
is refused before the first optimizer step naming field, expected and
observed; the legitimate setup beside it trains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from ftmanifest.errors import UsageError
from ftmanifest.examples.tiny import lm_examples
from ftmanifest.examples.training import own_arguments, tiny_trainer
from ftmanifest.integrations.transformers import (
    DriftRefusedError,
    FtManifestCallback,
    load_pinned,
)
from tests.integrations.trainer_guard_test import example, locked, refused  # noqa: F401

LORA = "method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj, v_proj]\n"


def _trainer(manifest: Path, out: Path, **kw: Any) -> Trainer:
    guard = FtManifestCallback(manifest, signature=False)
    trainer: Trainer = tiny_trainer(manifest.parent, out, [guard], **kw)
    return trainer


def _rows(err: DriftRefusedError, field: str) -> list[Any]:
    return [f for f in err.report.findings if f.field == field]


def _pin_environment_kernel(manifest: Path, kernel: str) -> None:
    text = manifest.read_text("utf-8")
    assert "environment:\n" in text
    manifest.write_text(
        text.replace("environment:\n", f"environment:\n  attn_implementation: {kernel}\n"), "utf-8"
    )


def test_the_environment_kernel_is_what_load_pinned_loads_and_the_guard_judges(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    _pin_environment_kernel(example, "sdpa")
    with pytest.raises(UsageError) as err:
        load_pinned(example, attn_implementation="eager")
    assert err.value.field == "environment.attn_implementation"
    assert err.value.expected == "sdpa" and "eager" in str(err.value.observed)
    model, _ = load_pinned(example, tokenizer=False)
    assert model.config._attn_implementation == "sdpa"
    trainer = _trainer(example, tmp_path / "ok", model=model)
    trainer.train()  # the control: the pinned kernel trains
    assert trainer.state.global_step == 3

    eager = AutoModelForCausalLM.from_pretrained(
        example.parent / "model", attn_implementation="eager"
    )
    err = refused(_trainer(example, tmp_path / "no", model=eager))
    row = _rows(err, "environment.attn_implementation")
    observed = "eager (model.config._attn_implementation)"
    assert [(r.expected, r.observed) for r in row] == [("sdpa", observed)]
    assert row[0].hint and "load_pinned" in row[0].hint


def test_a_kernel_switched_after_loading_is_refused(example: Path, tmp_path: Path) -> None:  # noqa: F811
    _pin_environment_kernel(example, "sdpa")
    model, _ = load_pinned(example, tokenizer=False)
    model.set_attn_implementation("eager")
    err = refused(_trainer(example, tmp_path / "no", model=model))
    assert _rows(err, "environment.attn_implementation")


def test_a_frozen_half_precision_base_under_a_lora_is_refused_under_fp32(
    example: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Only the adapter trains, in fp32; the base computes the forward pass in bf16."""
    from peft import get_peft_model

    from ftmanifest.integrations.transformers import lora_config

    example.write_text(example.read_text("utf-8").replace("method:\n  kind: full\n", LORA))
    base = example.parent / "model"
    bf16 = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16)
    lora = get_peft_model(bf16, lora_config(example))
    for p in lora.parameters():
        if p.requires_grad:
            p.data = p.data.float()  # the adapter in fp32, as autocast-free LoRA recipes keep it
    row = _rows(refused(_trainer(example, tmp_path / "no", model=lora)), "training.precision")
    assert row and "bfloat16" in row[0].observed
    assert row[0].expected == "parameters in float32"

    fp32 = get_peft_model(AutoModelForCausalLM.from_pretrained(base), lora_config(example))
    trainer = _trainer(example, tmp_path / "ok", model=fp32)
    trainer.train()  # the control: the fp32 base and adapter train
    assert trainer.state.global_step == 3


def _with_tokenizer(manifest: Path, out: Path, tok: Any) -> Trainer:
    """The example's Trainer, handed ``tok`` as its processing_class."""
    args: TrainingArguments = own_arguments(manifest, out)
    model = AutoModelForCausalLM.from_pretrained(manifest.parent / "model")
    data = lm_examples(manifest.parent / "data" / "train.jsonl", tok, seq_len=32)
    guard = FtManifestCallback(manifest, signature=False)
    return Trainer(model=model, args=args, train_dataset=data, processing_class=tok,
                   callbacks=[guard])  # fmt: skip


TEMPLATE = "{% for m in messages %}<s>{{ m['content'] }}</s>{% endfor %}"


def _change(tok: Any, change: str) -> str:
    """Change ``tok`` after loading as a script would; the field the guard must name."""
    if change == "chat template":
        tok.chat_template = TEMPLATE
        return "model.tokenizer.chat_template"
    if change == "pad is eos":
        tok.pad_token = tok.eos_token
        return "model.tokenizer.pad_token"
    tok.add_special_tokens({"additional_special_tokens": ["<tool>"]})
    return "model.tokenizer.special_tokens"


def test_the_pinned_tokenizer_trains(example: Path, tmp_path: Path) -> None:  # noqa: F811
    _, tok = load_pinned(example)
    trainer = _with_tokenizer(example, tmp_path / "out", tok)
    trainer.train()
    assert trainer.state.global_step == 3


@pytest.mark.parametrize("change", ["chat template", "pad is eos", "special token added"])
def test_a_tokenizer_changed_after_loading_is_refused(
    example: Path,  # noqa: F811
    tmp_path: Path,
    change: str,
) -> None:
    _, tok = load_pinned(example)
    field = _change(tok, change)
    err = refused(_with_tokenizer(example, tmp_path / "out", tok))
    row = _rows(err, field)
    assert row and row[0].rule == "drift.tokenizer" and row[0].expected != row[0].observed
    if change == "chat template":
        assert row[0].expected == "none" and "characters" in row[0].observed
    if change == "pad is eos":
        assert (row[0].expected, row[0].observed) == ("<pad> (id 0)", "</s> (id 3)")
