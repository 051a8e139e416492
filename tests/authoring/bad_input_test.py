"""A config init cannot use is an error naming the file, the key, what was expected,
what was found and the fix (exit 2), never a traceback, and nothing is written.

Each case is one of the tools' own example configs (tests/authoring/fixtures) with
one value spoiled; the control is the same config unspoiled.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli

FIXTURES = Path(__file__).parent / "fixtures"
LF_SFT = "examples/train_lora/llama3_lora_sft.yaml"
LF_FULL = "examples/train_full/llama3_full_sft.yaml"

# (fixture folder, file to spoil, text replaced, replacement, file named, key named, found)
CASES = {
    "axolotl lora_r not a number": (
        "axolotl", "lora-1b.yml", "lora_r: 16", "lora_r: sixteen",
        "lora-1b.yml", "lora_r", "sixteen",
    ),
    "axolotl datasets not a list": (
        "axolotl", "lora-1b.yml", "datasets:\n", "datasets: 7\nunused:\n",
        "lora-1b.yml", "datasets", "7",
    ),
    "axolotl base_model a list": (
        "axolotl", "fft-8b.yaml", "base_model: NousResearch/Meta-Llama-3.1-8B",
        "base_model: [a, b]", "fft-8b.yaml", "base_model", "['a', 'b']",
    ),
    "axolotl a dataset entry not a mapping": (
        "axolotl", "fft-8b.yaml", "  - path: tatsu-lab/alpaca\n    type: alpaca\n", "  - 5\n",
        "fft-8b.yaml", "datasets[0]", "5",
    ),
    "axolotl sequence_len zero": (
        "axolotl", "qlora-1b.yml", "sequence_len: 2048", "sequence_len: 0",
        "qlora-1b.yml", "sequence_len", "0",
    ),
    "LLaMA-Factory lora_rank not a number": (
        "llamafactory", LF_SFT, "lora_rank: 8", "lora_rank: eight",
        "llama3_lora_sft.yaml", "lora_rank", "eight",
    ),
    "LLaMA-Factory learning_rate not a number": (
        "llamafactory", LF_SFT, "learning_rate: 1.0e-4", "learning_rate: fast",
        "llama3_lora_sft.yaml", "learning_rate", "fast",
    ),
    "LLaMA-Factory dataset_info.json broken": (
        "llamafactory", "data/dataset_info.json", "{", "{{", "dataset_info.json", None, None,
    ),
    "LLaMA-Factory deepspeed config broken": (
        "llamafactory", "examples/deepspeed/ds_z3_config.json", "{", "[", "ds_z3_config.json",
        None, None,
    ),
    "TRL CLI lora_r not a number": (
        "trl", "sft_config.yaml", "lora_r: 32", "lora_r: 3.5",
        "sft_config.yaml", "lora_r", "3.5",
    ),
    "TRL JSON batch size not a number": (
        "trl", "sft_args.json", '"per_device_train_batch_size": 2',
        '"per_device_train_batch_size": "two"', "sft_args.json",
        "per_device_train_batch_size", "two",
    ),
}  # fmt: skip
CONFIG = {
    "axolotl": None,
    "llamafactory": {"data/dataset_info.json": LF_SFT, "examples/deepspeed/ds_z3_config.json":
                     LF_FULL},
}  # fmt: skip


def _config(folder: str, spoiled: str) -> str:
    """The config init is given: the spoiled file, or the config that reads it."""
    table = CONFIG.get(folder) or {}
    return table.get(spoiled, spoiled)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_spoiled_value_is_a_located_error_and_nothing_is_written(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ftmanifest.cli import main

    folder, spoiled, old, new, named, key, found = CASES[case]
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / folder, project)
    monkeypatch.chdir(project)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    manifest = project / "exp.yaml"
    config = _config(folder, spoiled)
    assert main(["init", str(manifest), "--from", config]) == 0  # control: the example as it is
    before = manifest.read_text()
    text = (project / spoiled).read_text()
    assert old in text
    (project / spoiled).write_text(text.replace(old, new, 1))
    capsys.readouterr()
    rc = main(["init", str(manifest), "--force", "--from", config])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and "internal error" not in err
    assert named in err.splitlines()[0]  # the file
    if key is not None:
        assert f"field: {key}" in err
    assert "expected:" in err and "fix:" in err
    if found is not None:
        assert "observed:" in err and found in err
    assert manifest.read_text() == before  # an existing manifest is left as it was
    fresh = project / "fresh.yaml"
    assert main(["init", str(fresh), "--from", config]) == 2
    assert not fresh.exists()  # nothing half-written


def test_through_the_console_script_too(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "axolotl", project)
    config = project / "lora-1b.yml"
    config.write_text(config.read_text().replace("learning_rate: 0.0002", "learning_rate: fast"))
    result = run_cli("init", str(project / "exp.yaml"), "--from", str(config))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "learning_rate" in result.stderr and "training.optimizer.lr" in result.stderr
    assert not (project / "exp.yaml").exists()
