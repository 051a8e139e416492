"""init --from a LLaMA-Factory config, written from its documented keys (hparams and
examples/train_lora/*.yaml), with the dataset_info.json that names its files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.authoring.conftest import derived, fills, init_from

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


MINIMAL = """\
model_name_or_path: org/tiny
stage: sft
do_train: true
dataset: mine
template: llama3
output_dir: saves/tiny
learning_rate: 1.0e-4
bf16: true
"""


def _minimal(project: Path, text: str = MINIMAL) -> Path:
    (project / "data" / "dataset_info.json").write_text(
        json.dumps({"mine": {"file_name": "train.jsonl"}})
    )
    config = project / "lf.yaml"
    config.write_text(text)
    return config


def test_what_the_config_leaves_out_is_llamafactorys_own_default(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, payload, err = init_from(capsys, project / "exp.yaml", _minimal(project))
    assert rc == 0, err
    got = {d["field"]: d for d in payload["derived"]}
    # finetuning_args.py: finetuning_type lora, lora_rank 8, lora_alpha None -> rank * 2
    assert got["method.kind"]["value"] == "lora" and got["method.r"]["value"] == 8
    assert got["method.alpha"]["value"] == 16.0 and got["method.dropout"]["value"] == 0.0
    assert got["method.target_modules"]["value"] == "all-linear"  # lora_target: all
    assert got["method.alpha"]["source"] == "LLaMA-Factory"
    assert "lora_rank * 2" in got["method.alpha"]["key"]
    # LLaMA-Factory turns gradient checkpointing on itself (unless disabled)
    assert got["training.activation_checkpointing"]["value"] is True
    assert got["training.seq_len"]["value"] == 2048  # data_args.py cutoff_len
    assert got["seeds.python"]["value"] == 42  # TrainingArguments' seed
    assert got["training.grad_accum"]["value"] == 1 and got["training.micro_batch"]["value"] == 8
    text = (project / "exp.yaml").read_text()
    assert "default of LLaMA-Factory hparams/finetuning_args.py lora_rank" in text
    assert "default of transformers TrainingArguments training_args.py seed" in text
    # the optimizer transformers picks depends on the installed torch: a FILL, never guessed
    fill = {f["field"]: f["decide"] for f in payload["fill"]}
    assert (
        "training.optimizer.name" in fill and "adamw_torch_fused" in fill["training.optimizer.name"]
    )
    assert "name: null" in text


def test_a_stated_rank_sets_the_default_alpha_and_stated_values_win(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = MINIMAL + "lora_rank: 16\ndisable_gradient_checkpointing: true\noptim: adamw_torch\n"
    rc, payload, err = init_from(capsys, project / "exp.yaml", _minimal(project, text))
    assert rc == 0, err
    got = derived(payload)
    assert got["method.r"] == 16 and got["method.alpha"] == 32.0  # lora_rank * 2
    assert got["training.activation_checkpointing"] is False
    assert got["training.optimizer.name"] == "adamw_torch"
    assert "training.optimizer.name" not in fills(payload)


def test_a_deepspeed_config_gives_the_zero_stage_or_a_fill(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "ds.json").write_text('{"zero_optimization": {"stage": 2}}')
    rc, payload, err = init_from(
        capsys, project / "a.yaml", _minimal(project, MINIMAL + "deepspeed: ds.json\n")
    )
    assert rc == 0, err
    assert derived(payload)["distributed.strategy"] == "zero2"
    assert "distributed.world_size" in fills(payload)  # how many processes: the run's
    rc, payload, err = init_from(
        capsys, project / "b.yaml", _minimal(project, MINIMAL + "deepspeed: gone.json\n")
    )
    assert rc == 0, err
    assert "distributed.strategy" in fills(payload) and "distributed.strategy" not in derived(
        payload
    )
