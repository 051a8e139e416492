"""init --from an axolotl config, written from axolotl's documented config keys.

With local data, explicit precision, seed and warm-up, an axolotl LoRA config
leaves at most 10 values to fill before lock and lint pass; axolotl's own
examples leave more (tests/authoring/upstream_examples_test.py counts them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.authoring.conftest import derived, init_from
from tests.conftest import git

# Keys as axolotl's config reference names them (model, datasets, LoRA, training).
AXOLOTL = """\
base_model: org/tiny
revision_of_model: main
datasets:
  - path: data/train.jsonl
    type: alpaca
test_datasets: []
val_set_size: 0
adapter: lora
lora_r: 8
lora_alpha: 16
lora_dropout: 0.05
lora_target_modules:
  - v_proj
  - q_proj
lora_modules_to_save:
  - lm_head
sequence_len: 512
sample_packing: false
micro_batch_size: 2
gradient_accumulation_steps: 4
num_epochs: 3
learning_rate: 2e-4
optimizer: adamw_torch
lr_scheduler: cosine
warmup_steps: 10
weight_decay: 0.0
train_on_inputs: false
bf16: true
gradient_checkpointing: true
seed: 42
output_dir: ./outputs/lora-out
logging_steps: 1
wandb_project: demo
"""


def _write(project: Path, text: str = AXOLOTL) -> Path:
    config = project / "axolotl.yml"
    config.write_text(text)
    return config


def test_every_documented_key_lands_on_its_field(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _write(project)
    manifest = project / "exp.yaml"
    rc, payload, err = init_from(capsys, manifest, config, project / "data" / "test.jsonl")
    assert rc == 0, err
    got = derived(payload)
    assert got["model.repo"] == "org/tiny"
    assert got["model.revision"] == hub["main"]  # refs/main in the cache
    assert got["model.license"] == "apache-2.0"  # the model card's front matter
    assert got["method.kind"] == "lora" and got["method.r"] == 8 and got["method.alpha"] == 16.0
    assert got["method.target_modules"] == ["q_proj", "v_proj"]
    assert got["method.modules_to_save"] == ["lm_head"]
    assert got["training.seq_len"] == 512 and got["training.micro_batch"] == 2
    assert got["training.grad_accum"] == 4 and got["training.epochs"] == 3.0
    assert got["training.optimizer.lr"] == 2e-4  # a string to PyYAML, a number here
    assert got["training.optimizer.name"] == "adamw_torch"
    assert got["training.loss_on"] == "completion" and got["training.precision"] == "bf16"
    assert got["training.activation_checkpointing"] is True
    assert got["training.loss_normalization"] == "per-token"
    assert {got[f"seeds.{k}"] for k in ("python", "numpy", "torch", "data_order")} == {42}
    assert got["export.path"] == "./outputs/lora-out" and got["export.kind"] == "adapter"
    assert got["data[0].role"] == "train" and got["data[0].path"] == "data/train.jsonl"
    assert got["data[0].format"] == "jsonl" and got["data[1].role"] == "test"
    text = manifest.read_text()
    assert "r: 8" in text and "# from axolotl.yml: lora_r" in text
    assert "# from axolotl.yml: datasets[0].path" in text
    assert "wandb_project" not in err and "logging_steps" not in err  # bookkeeping, no note


def test_lora_target_linear_is_all_linear(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = "lora_target_modules:\n  - v_proj\n  - q_proj\n"
    text = AXOLOTL.replace(listed, "lora_target_linear: true\n")
    rc, payload, err = init_from(capsys, project / "exp.yaml", _write(project, text))
    assert rc == 0, err
    assert derived(payload)["method.target_modules"] == "all-linear"


def _fill_value(field: str) -> Any:
    if field == "experiment.task":
        return "generation"
    if field == "experiment.hypothesis":
        return "answers keep the house format more often than the base model"
    if field == "experiment.guards":
        return [{"kind": "format_validity", "format": "json", "min_rate": 0.95}]
    if field.endswith(".license"):
        return "CC-BY-4.0"
    if field.endswith(".contains_personal_data"):
        return False
    if field.endswith(".sealed"):
        return True
    if field == "security.retention":
        return {"checkpoints": "30d", "logs": "90d", "raw_data": "180d"}
    raise AssertionError(f"a FILL the test does not know: {field}")


def test_a_lora_config_and_its_data_lint_clean_after_at_most_ten_fills(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ftmanifest.lint import lint_paths
    from ftmanifest.location import Loc
    from ftmanifest.manifest.edit import apply_yaml
    from ftmanifest.manifest.load import read_document
    from ftmanifest.verify.lock import lock_manifest

    config = _write(project)
    (project / "train.py").write_text("print('train')\n")
    manifest = project / "exp.yaml"
    rc, payload, err = init_from(capsys, manifest, config, project / "data" / "test.jsonl")
    assert rc == 0, err
    todo = payload["fill"]
    assert len(todo) <= 10, [f["field"] for f in todo]
    doc = read_document(manifest)
    ups: list[tuple[Loc, Any]] = []
    for f in todo:
        loc = next(loc for loc in _locs(doc.data) if _field(loc) == f["field"])
        ups.append((loc, _fill_value(f["field"])))
    manifest.write_text(apply_yaml(manifest.read_text(), ups))
    (project / "requirements.lock").write_text("ftmanifest==0.1.0\n")  # as pip freeze writes
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "experiment")
    lock_manifest(manifest)
    git(project, "commit", "-q", "-am", "locked")
    findings, unusable = lint_paths([str(manifest)])
    assert unusable == 0 and findings == [], "\n".join(f.message for f in findings)


def _locs(node: Any, loc: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [loc] if loc else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _locs(v, (*loc, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _locs(v, (*loc, i))
    return out


def _field(loc: tuple[Any, ...]) -> str:
    from ftmanifest.location import format_loc

    return format_loc(loc)


def test_an_unstated_rank_is_a_null_fill_that_lint_refuses_never_a_plausible_value(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ftmanifest.lint import lint_paths

    text = AXOLOTL.replace("lora_r: 8\nlora_alpha: 16\n", "")
    manifest = project / "exp.yaml"
    rc, payload, err = init_from(capsys, manifest, _write(project, text))
    assert rc == 0, err
    todo = [f["field"] for f in payload["fill"]]
    assert "method.r" in todo and "method.alpha" in todo
    written = manifest.read_text()
    assert "  r: null" in written and "  alpha: null" in written
    assert "r: 16" not in written and "alpha: 32" not in written
    findings, unusable = lint_paths([str(manifest)])
    assert unusable == 1 and {f.field for f in findings} >= {"method.r", "method.alpha"}
