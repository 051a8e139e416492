"""init --from a LLaMA-Factory config, written from its documented keys (hparams and
examples/train_lora/*.yaml), with the dataset_info.json that names its files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.authoring.conftest import derived, init_from

LLAMAFACTORY = """\
model_name_or_path: org/tiny
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 16
lora_alpha: 32
lora_dropout: 0.1
lora_target: q_proj,v_proj
dataset: mine
eval_dataset: mine_eval
dataset_dir: data
template: llama3
cutoff_len: 1024
train_on_prompt: false
output_dir: saves/tiny/lora/sft
logging_steps: 10
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
bf16: true
seed: 7
val_size: 0.0
"""


def test_documented_keys_land_on_their_fields(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "data" / "dataset_info.json").write_text(
        json.dumps({"mine": {"file_name": "train.jsonl"}, "mine_eval": {"file_name": "dev.jsonl"}})
    )
    (project / "data" / "dev.jsonl").write_text('{"instruction": "x", "output": "y"}\n')
    config = project / "lf.yaml"
    config.write_text(LLAMAFACTORY)
    rc, payload, err = init_from(capsys, project / "exp.yaml", config)
    assert rc == 0, err
    got = derived(payload)
    assert got["model.repo"] == "org/tiny" and got["model.revision"] == hub["main"]
    assert got["method.kind"] == "lora" and got["method.r"] == 16 and got["method.alpha"] == 32.0
    assert got["method.target_modules"] == ["q_proj", "v_proj"]
    assert got["training.seq_len"] == 1024 and got["training.loss_on"] == "completion"
    assert got["training.micro_batch"] == 1 and got["training.grad_accum"] == 8
    assert got["training.optimizer.lr"] == 1e-4 and got["training.optimizer.schedule"] == "cosine"
    assert got["training.epochs"] == 3.0 and got["training.precision"] == "bf16"
    assert got["training.loss_normalization"] == "per-token"
    assert got["seeds.data_order"] == 7 and got["export.path"] == "saves/tiny/lora/sft"
    assert (got["data[0].role"], got["data[0].path"]) == ("train", "data/train.jsonl")
    assert (got["data[1].role"], got["data[1].path"]) == ("eval", "data/dev.jsonl")
    assert "template" in err  # the prompt template changes training: named, not dropped
    assert "logging_steps" not in err


def test_lora_target_all_is_all_linear_and_dpo_is_an_objective(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = LLAMAFACTORY.replace("lora_target: q_proj,v_proj", "lora_target: all")
    text = text.replace("stage: sft", "stage: dpo\npref_beta: 0.1\npref_loss: sigmoid")
    config = project / "lf.yaml"
    config.write_text(text)
    rc, payload, err = init_from(capsys, project / "exp.yaml", config)
    assert rc == 0, err
    got = derived(payload)
    assert got["method.target_modules"] == "all-linear"
    assert got["training.objective.kind"] == "dpo" and got["training.objective.beta"] == 0.1
    assert got["training.loss_normalization"] == "per-sequence"
    assert "mine" in err  # no dataset_info.json: the dataset is named in a note
