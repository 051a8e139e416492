"""TRL's SFTTrainer and DPOTrainer under the guard: real trainers on the CPU.

The issue's first case: an SFTTrainer with batch 8, 5 steps, max_length 16
and the Trainer's default seed 42 against a manifest of micro_batch 4,
max_steps 3, seq_len 32, seeds 0 trained to the end.  Now every difference is
a row before step 1, and ``sft_config(MANIFEST)`` trains.  A DPOTrainer is an
objective the manifest must state (``training.objective``), with its beta.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="TRL is a test extra: pip install -e '.[dev]'")

from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import DPOTrainer, SFTConfig, SFTTrainer  # noqa: E402

from ftmanifest.examples.tiny import DEPARTMENTS  # noqa: E402
from ftmanifest.integrations.transformers import (  # noqa: E402
    DriftRefusedError,
    FtManifestCallback,
    dpo_config,
    sft_config,
)

QUIET = {"report_to": [], "save_strategy": "no", "disable_tqdm": True, "logging_strategy": "no"}
pytestmark = pytest.mark.filterwarnings("ignore")


def _records(manifest: Path) -> list[dict[str, Any]]:
    lines = (manifest.parent / "data" / "train.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _prompt_completion(manifest: Path) -> Dataset:
    return Dataset.from_list([
        {"prompt": r["messages"][1]["content"], "completion": " " + r["label"]}
        for r in _records(manifest)
    ])  # fmt: skip


def _sft(manifest: Path, args: Any, data: Dataset | None = None) -> SFTTrainer:
    folder = manifest.parent / "model"
    return SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(folder),
        args=args,
        train_dataset=data if data is not None else _prompt_completion(manifest),
        processing_class=AutoTokenizer.from_pretrained(folder),
        callbacks=[FtManifestCallback(manifest, signature=False)],
    )


def _fields(trainer: Any) -> set[str]:
    with pytest.raises(DriftRefusedError) as err:
        trainer.train()
    assert trainer.state.global_step == 0
    return {f.field for f in err.value.report.findings if f.field}


def test_the_issue_sft_run_is_refused_naming_every_difference(
    example: Path, tmp_path: Path
) -> None:
    args = SFTConfig(output_dir=str(tmp_path / "o"), per_device_train_batch_size=8, max_steps=5,
                     max_length=16, use_cpu=True, bf16=False, **QUIET)  # fmt: skip
    found = _fields(_sft(example, args))
    assert {"seeds.torch", "training.micro_batch", "training.max_steps",
            "training.seq_len", "training.activation_checkpointing",
            "training.optimizer.lr"} <= found, found  # fmt: skip


def test_sft_config_from_the_manifest_trains(example: Path, tmp_path: Path) -> None:
    trainer = _sft(example, sft_config(example, output_dir=str(tmp_path / "o"), **QUIET))
    trainer.train()
    assert trainer.state.global_step == 3


def test_sft_on_plain_text_puts_loss_on_the_prompt_and_is_refused(
    example: Path, tmp_path: Path
) -> None:
    """TRL's default for a text dataset trains every token; the manifest says completion."""
    text = Dataset.from_list([
        {"text": r["messages"][1]["content"] + " " + r["label"]} for r in _records(example)
    ])  # fmt: skip
    args = sft_config(example, output_dir=str(tmp_path / "o"), **QUIET)
    assert "training.loss_on" in _fields(_sft(example, args, text))


def test_completion_only_loss_off_is_refused(example: Path, tmp_path: Path) -> None:
    args = SFTConfig(**{**_sft_kwargs(example, tmp_path), "completion_only_loss": False})
    assert "training.loss_on" in _fields(_sft(example, args))


def _sft_kwargs(manifest: Path, tmp_path: Path) -> dict[str, Any]:
    from dataclasses import fields

    built = sft_config(manifest, output_dir=str(tmp_path / "o"), **QUIET)
    return {f.name: getattr(built, f.name) for f in fields(built) if f.init
            and not f.name.endswith("_token") and f.name != "gradient_checkpointing"}  # fmt: skip


def _preferences(manifest: Path) -> Dataset:
    rows = []
    for i, r in enumerate(_records(manifest)):
        other = DEPARTMENTS[(DEPARTMENTS.index(r["label"]) + 1 + i) % len(DEPARTMENTS)]
        other = other if other != r["label"] else DEPARTMENTS[0]
        rows.append({"prompt": r["messages"][1]["content"], "chosen": " " + r["label"],
                     "rejected": " " + other})  # fmt: skip
    return Dataset.from_list(rows)


def _dpo(manifest: Path, args: Any) -> DPOTrainer:
    folder = manifest.parent / "model"
    return DPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(folder),
        args=args,
        train_dataset=_preferences(manifest),
        processing_class=AutoTokenizer.from_pretrained(folder),
        callbacks=[FtManifestCallback(manifest, signature=False)],
    )


def test_an_undeclared_dpo_objective_is_refused(example: Path, tmp_path: Path) -> None:
    args = dpo_config(example, output_dir=str(tmp_path / "o"), **QUIET)
    assert "training.objective.kind" in _fields(_dpo(example, args))


def _declare_dpo(manifest: Path, beta: float) -> None:
    text = manifest.read_text("utf-8").replace(
        "  precision: fp32\n",
        "  precision: fp32\n  objective:\n    kind: dpo\n"
        f"    beta: {beta}\n    loss_type: sigmoid\n",
    )
    manifest.write_text(text, "utf-8")


def test_a_declared_dpo_objective_trains_and_another_beta_is_refused(
    example: Path, tmp_path: Path
) -> None:
    _declare_dpo(example, 0.2)
    trainer = _dpo(example, dpo_config(example, output_dir=str(tmp_path / "a"), **QUIET))
    assert trainer.args.beta == 0.2
    trainer.train()
    assert trainer.state.global_step == 3
    args = dpo_config(example, output_dir=str(tmp_path / "b"), **QUIET)
    args.beta = 0.5
    assert "training.objective.beta" in _fields(_dpo(example, args))
