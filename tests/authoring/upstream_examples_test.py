"""init --from each training tool's own documented example config gives a usable manifest.

For every example in tests/authoring/fixtures (axolotl's LoRA, QLoRA, full and DPO
examples, LLaMA-Factory's LoRA SFT, full SFT and LoRA DPO examples, TRL's
SFTConfig/DPOConfig JSON and its CLI configs): init writes the manifest, the
test fills exactly the values init marks FILL and nothing else, then `lock`
and `lint` pass through the real commands.  The model is a tiny folder in a
hub cache under the example's repo name; nothing touches the network.  A
second test counts each example's FILLs and compares them with the table in
docs/guides/manifest.md, so the guide cannot promise fewer than there are.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.authoring.conftest import CARD, init_from
from tests.conftest import ROOT, git
from tests.support.hubcache import build_hub_cache

FIXTURES = Path(__file__).parent / "fixtures"
GUIDE = ROOT / "docs" / "guides" / "manifest.md"


@dataclass(frozen=True)
class Example:
    folder: str  # copied into the project
    config: str  # the config, inside the project
    repo: str  # the base model the config names (or the run uses)
    more: tuple[str, ...] = ()  # other --from sources: a model reference, data


EXAMPLES = {
    "axolotl lora-1b.yml": Example("axolotl", "lora-1b.yml", "NousResearch/Llama-3.2-1B"),
    "axolotl qlora-1b.yml": Example("axolotl", "qlora-1b.yml", "NousResearch/Llama-3.2-1B"),
    "axolotl fft-8b.yaml": Example("axolotl", "fft-8b.yaml", "NousResearch/Meta-Llama-3.1-8B"),
    "axolotl instruct-dpo-lora-8b.yml": Example(
        "axolotl", "instruct-dpo-lora-8b.yml", "meta-llama/Meta-Llama-3-8B-Instruct"
    ),
    "LLaMA-Factory llama3_lora_sft.yaml": Example(
        "llamafactory",
        "examples/train_lora/llama3_lora_sft.yaml",
        "meta-llama/Meta-Llama-3-8B-Instruct",
    ),  # fmt: skip
    "LLaMA-Factory llama3_full_sft.yaml": Example(
        "llamafactory",
        "examples/train_full/llama3_full_sft.yaml",
        "meta-llama/Meta-Llama-3-8B-Instruct",
    ),  # fmt: skip
    "LLaMA-Factory llama3_lora_dpo.yaml": Example(
        "llamafactory",
        "examples/train_lora/llama3_lora_dpo.yaml",
        "meta-llama/Meta-Llama-3-8B-Instruct",
    ),  # fmt: skip
    "TRL SFTConfig JSON": Example(
        "trl", "sft_args.json", "Qwen/Qwen2-0.5B", ("Qwen/Qwen2-0.5B", "data/train.jsonl")
    ),
    "TRL DPOConfig JSON": Example(
        "trl",
        "dpo_args.json",
        "Qwen/Qwen2-0.5B-Instruct",
        ("Qwen/Qwen2-0.5B-Instruct", "data/train.jsonl"),
    ),  # fmt: skip
    "TRL CLI sft_config.yaml": Example("trl", "sft_config.yaml", "Qwen/Qwen2-0.5B"),
    "TRL CLI dpo_config.yaml": Example("trl", "dpo_config.yaml", "Qwen/Qwen2.5-0.5B"),
    "TRL CLI example_config.yaml": Example("trl", "example_config.yaml", "Qwen/Qwen2.5-0.5B"),
}
RECORDS = '{"instruction": "a", "output": "b"}\n{"instruction": "c", "output": "d"}\n'


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: Example) -> Path:
    """The example's folder copied, its base model in a hub cache, a test split beside it;
    run from the project's root, as the tools' own examples are run."""
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / example.folder, project)
    (project / "data").mkdir(exist_ok=True)
    (project / "data" / "test.jsonl").write_text('{"instruction": "e", "output": "f"}\n')
    (project / "data" / "train.jsonl").write_text(RECORDS)
    model = tmp_path / "model-src"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    (model / "model.safetensors").write_bytes(b"weights" * 64)
    (model / "README.md").write_bytes(CARD)
    build_hub_cache(tmp_path / "hf-cache", example.repo, {"v1": model}, {"main": "v1"})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "ftm-cache"))
    monkeypatch.chdir(project)
    return project


def _init(capsys: pytest.CaptureFixture[str], project: Path, example: Example) -> dict[str, Any]:
    sources = [example.config, *example.more, "data/test.jsonl"]
    rc, payload, err = init_from(capsys, project / "exp.yaml", *sources)
    assert rc == 0, err
    assert "Traceback" not in err
    assert "unknown" not in err  # every key of a documented example is a documented key
    return payload


def _value(field: str, project: Path) -> Any:
    """What a person writes for a FILL: a value of the right kind, chosen by the test."""
    fixed: dict[str, Any] = {
        "experiment.task": "generation",
        "experiment.hypothesis": "answers keep the house format more often than the base model",
        "experiment.guards": [{"kind": "format_validity", "format": "json", "min_rate": 0.95}],
        "model.license": "llama3",
        "security.retention": {"checkpoints": "30d", "logs": "90d", "raw_data": "180d"},
        "training.precision": "bf16",
        "training.optimizer.name": "adamw_torch_fused",
        "training.optimizer.warmup_steps": 10,
        "training.objective.kind": "sft",
        "training.loss_normalization": "per-token",
        "method.kind": "full",
        "method.target_modules": ["q_proj", "v_proj"],
        "distributed.world_size": 8,
    }
    if field in fixed:
        return fixed[field]
    if re.fullmatch(r"data\[\d+\]\.path", field):
        return "data/train.jsonl"  # the local copy of the hub dataset
    if field.endswith(".license"):
        return "CC-BY-4.0"
    if field.endswith(".contains_personal_data"):
        return False
    if field.endswith(".sealed"):
        return True
    raise AssertionError(f"a FILL this test does not know how to fill: {field}")


def _fill(manifest: Path, todo: list[dict[str, str]], project: Path) -> None:
    from ftmanifest.manifest.edit import apply_yaml
    from ftmanifest.manifest.fills import fill_marks

    marks = {m.loc: m for m in fill_marks(manifest.read_text())}
    from ftmanifest.location import format_loc

    by_field = {format_loc(loc): loc for loc in marks}
    assert sorted(by_field) == sorted(f["field"] for f in todo)  # --format json lists them all
    ups = [(by_field[f["field"]], _value(f["field"], project)) for f in todo]
    manifest.write_text(apply_yaml(manifest.read_text(), ups))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_filling_only_the_fills_gives_a_manifest_that_locks_and_lints(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ftmanifest.cli import main

    example = EXAMPLES[name]
    project = _project(tmp_path, monkeypatch, example)
    payload = _init(capsys, project, example)
    manifest = project / "exp.yaml"
    assert main(["lint", str(manifest)]) in (1, 2)  # refused while anything is left to fill
    _fill(manifest, payload["fill"], project)
    (project / "train.py").write_text("print('train')\n")
    (project / "requirements.lock").write_text("ftmanifest==0.1.0\n")  # as pip freeze writes
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "experiment")
    capsys.readouterr()
    assert main(["lock", str(manifest)]) == 0, capsys.readouterr().err
    git(project, "commit", "-q", "-am", "locked")
    capsys.readouterr()
    rc = main(["lint", str(manifest)])
    assert rc == 0, capsys.readouterr().out


def fill_counts(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:  # fmt: skip
    counts = {}
    for name, example in EXAMPLES.items():
        with monkeypatch.context() as m:
            project = _project(tmp_path / re.sub(r"\W+", "-", name), m, example)
            counts[name] = len(_init(capsys, project, example)["fill"])
    return counts


def _guide_table() -> dict[str, int]:
    text = GUIDE.read_text()
    body = text.split("<!-- fill-counts -->", 2)[1]
    rows = re.findall(r"^\| (.+?) \| (\d+) \|", body, flags=re.M)
    return {name.replace("`", ""): int(n) for name, n in rows}


def test_the_guide_states_each_examples_fill_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _guide_table() == fill_counts(capsys, tmp_path, monkeypatch)
