"""init --from a TRL command-line config (``trl sft --config sft_config.yaml``).

Its keys are those of TrlParser's dataclasses: ScriptArguments and
DatasetMixtureConfig (data), ModelConfig (model, LoRA) and the trainer's config.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from tests.authoring.conftest import derived, fills, init_from

SFT = """\
model_name_or_path: org/tiny
dataset_name: data/train.jsonl
learning_rate: 2.0e-4
packing: true
use_peft: true
lora_target_modules: [q_proj, v_proj]
output_dir: out
"""


def test_a_trl_cli_config_is_read_not_refused(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project / "config.yaml"
    config.write_text(SFT)
    rc, payload, err = init_from(capsys, project / "exp.yaml", config)
    assert rc == 0, err
    got = derived(payload)
    assert got["model.repo"] == "org/tiny" and got["model.revision"] == hub["main"]
    assert got["training.objective.kind"] == "sft"  # packing: an SFTConfig key
    assert got["method.kind"] == "lora" and got["method.target_modules"] == ["q_proj", "v_proj"]
    # ModelConfig's defaults (trainer/model_config.py): lora_r 16, lora_alpha 32, dropout 0.05
    assert (got["method.r"], got["method.alpha"], got["method.dropout"]) == (16, 32.0, 0.05)
    assert got["training.optimizer.lr"] == 2e-4 and got["training.seq_len"] == 1024
    assert got["training.activation_checkpointing"] is True  # TRL's own default
    assert got["data[0].path"] == "data/train.jsonl" and got["data[0].role"] == "train"
    assert got["export.kind"] == "adapter"
    assert "training.optimizer.name" in fills(payload)  # transformers' default is torch's
    assert "unknown" not in err


@pytest.mark.parametrize(
    ("name", "extra", "kind"),
    [
        ("dpo_config.yaml", "", "dpo"),  # the command word in the file's name, as TRL's docs
        ("config.yaml", "beta: 0.2\n", "dpo"),  # a DPOConfig key
        ("run.yaml", "", None),  # nothing tells: a FILL
    ],
)
def test_the_command_comes_from_a_key_or_the_file_name_or_is_a_fill(
    hub: dict[str, str],
    project: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    extra: str,
    kind: str | None,
) -> None:
    config = project / name
    config.write_text("model_name_or_path: org/tiny\ndataset_name: org/data\n" + extra)
    rc, payload, err = init_from(capsys, project / "exp.yaml", config)
    assert rc == 0, err
    got = derived(payload)
    if kind is None:
        assert "training.objective.kind" in fills(payload)
        assert "training.optimizer.lr" in fills(payload)  # each trainer has its own default
    else:
        assert got["training.objective.kind"] == kind
        assert got["training.optimizer.lr"] == 1e-6  # DPOConfig's default
    assert got["method.kind"] == "full"  # use_peft: false, ModelConfig's default
    assert "data[0].path" in fills(payload)  # org/data: a hub dataset, its local copy to name


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:  # a computed default (transformers' optim): not one init writes
        return ast.unparse(node)


def _fields(module: str, relpath: str, cls: str) -> dict[str, object]:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{module} is not installed")
    tree = ast.parse((Path(spec.submodule_search_locations[0]) / relpath).read_text("utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    out: dict[str, object] = {}
    for s in node.body:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
            default = None
            if isinstance(s.value, ast.Call):
                for kw in s.value.keywords:
                    if kw.arg == "default":
                        default = _literal(kw.value)
                    elif kw.arg == "default_factory" and isinstance(kw.value, ast.Lambda):
                        default = _literal(kw.value.body)
            out[s.target.id] = default
    return out


def test_the_trl_cli_keys_hold_every_field_installed() -> None:
    from ftmanifest.authoring import trl_cli

    script = _fields("trl", "scripts/utils.py", "ScriptArguments")
    mixture = _fields("trl", "scripts/utils.py", "DatasetMixtureConfig")
    model = _fields("trl", "trainer/model_config.py", "ModelConfig")
    assert set(script) | set(mixture) <= trl_cli.SCRIPT
    assert set(model) <= trl_cli.MODEL


# transformers 5: activation_checkpointing None becomes False (gradient_checkpointing's alias)
RESOLVED = {"activation_checkpointing": False}


def test_the_defaults_are_the_installed_tools_defaults() -> None:
    """Each default init writes is the one in the installed transformers / trl source."""
    from ftmanifest.authoring import defaults

    tables = [
        (defaults.TRAINER, "transformers", "training_args.py", "TrainingArguments"),
        (defaults.TRL_SFT, "trl", "trainer/sft_config.py", "SFTConfig"),
        (defaults.TRL_DPO, "trl", "trainer/dpo_config.py", "DPOConfig"),
        (defaults.TRL_MODEL, "trl", "trainer/model_config.py", "ModelConfig"),
    ]
    for table, module, relpath, cls in tables:
        installed = _fields(module, relpath, cls)
        for key, default in table.items():
            value = installed[key]
            if value is None and key in RESOLVED:  # __post_init__ turns None into this
                value = RESOLVED[key]
            assert value == default.value, (cls, key, installed[key], default.value)
    base = _fields("trl", "trainer/base_config.py", "_BaseConfig")
    assert base["gradient_checkpointing"] is True
    assert base["bf16"] is None  # None: __post_init__ makes it `not fp16`, True by default
