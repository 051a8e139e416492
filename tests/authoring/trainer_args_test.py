"""init --from a TrainingArguments / SFTConfig / DPOConfig JSON (``to_json_string()``),
and the refusal of a pickled training_args.bin."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest

from tests.authoring.conftest import derived, fills, init_from
from tests.conftest import run_cli

# A subset of what TrainingArguments.to_json_string() writes (transformers' field names).
ARGS = {
    "output_dir": "out",
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 2,
    "learning_rate": 5e-5,
    "weight_decay": 0.01,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "adam_epsilon": 1e-8,
    "max_grad_norm": 1.0,
    "num_train_epochs": 2.0,
    "max_steps": -1,
    "lr_scheduler_type": "linear",
    "warmup_steps": 0,
    "optim": "adamw_torch",
    "bf16": False,
    "fp16": False,
    "gradient_checkpointing": False,
    "seed": 42,
    "data_seed": None,
    "full_determinism": False,
    "logging_steps": 500,
    "report_to": ["none"],
}


def test_training_arguments_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = project / "training_args.json"
    source.write_text(json.dumps(ARGS))
    rc, payload, err = init_from(capsys, project / "exp.yaml", source, project / "data")
    assert rc == 0, err
    got = derived(payload)
    assert got["training.micro_batch"] == 4 and got["training.grad_accum"] == 2
    assert got["training.optimizer.name"] == "adamw_torch"
    assert got["training.optimizer.betas"] == [0.9, 0.999]
    assert got["training.optimizer.eps"] == 1e-8 and got["training.max_grad_norm"] == 1.0
    assert got["training.epochs"] == 2.0 and "training.max_steps" not in got
    assert got["training.precision"] == "fp32" and got["seeds.data_order"] == 42
    assert got["export.path"] == "out"
    # a plain Trainer's loss depends on the model's head: left to decide
    assert "training.loss_normalization" in fills(payload)
    assert "logging_steps" not in err


def test_sft_and_dpo_configs_set_the_objective(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sft = project / "sft.json"
    sft_keys = {"max_length": 1024, "packing": True, "completion_only_loss": True}
    sft.write_text(json.dumps({**ARGS, **sft_keys, "dataset_text_field": "text"}))
    rc, payload, err = init_from(capsys, project / "a.yaml", sft)
    got = derived(payload)
    assert rc == 0 and got["training.objective.kind"] == "sft" and got["training.seq_len"] == 1024
    assert got["training.packing.enabled"] is True and got["training.loss_on"] == "completion"
    assert got["training.loss_normalization"] == "per-token"
    dpo = project / "dpo.json"
    dpo.write_text(json.dumps({**ARGS, "beta": 0.1, "loss_type": ["sigmoid"],
                               "precompute_ref_log_probs": False, "max_length": 512}))  # fmt: skip
    rc, payload, err = init_from(capsys, project / "b.yaml", dpo)
    got = derived(payload)
    assert rc == 0 and got["training.objective.kind"] == "dpo"
    assert got["training.objective.beta"] == 0.1
    assert got["training.objective.loss_type"] == ["sigmoid"]


def test_a_pickled_training_args_bin_is_refused_unopened(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = project / "training_args.bin"
    source.write_bytes(b"\x80\x04\x95this would run code")
    manifest = project / "exp.yaml"
    result = run_cli("init", str(manifest), "--from", str(source))
    rc, err = result.returncode, result.stderr
    assert rc == 2 and "Traceback" not in err
    assert str(source) in err and "--from" in err  # the file and the field
    assert "to_json_string()" in err and "a pickled file" in err  # expected, observed
    assert "training_args.json" in err  # the fix
    assert not manifest.exists()


def _fields(module: str, relpath: str, cls: str) -> set[str]:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{module} is not installed")
    path = Path(spec.submodule_search_locations[0]) / relpath
    tree = ast.parse(path.read_text("utf-8"))  # read, not imported: no torch
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return {
        s.target.id
        for s in node.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    }


def test_the_key_lists_hold_every_field_installed() -> None:
    from ftmanifest.authoring import peft_config, trainer_args

    assert _fields("transformers", "training_args.py", "TrainingArguments") <= trainer_args.KNOWN
    assert _fields("trl", "trainer/sft_config.py", "SFTConfig") <= trainer_args.KNOWN
    assert _fields("trl", "trainer/dpo_config.py", "DPOConfig") <= trainer_args.KNOWN
    assert _fields("peft", "tuners/lora/config.py", "LoraConfig") <= peft_config.KNOWN
