"""The determinism row: the first steps twice, each in a fresh process, on a tiny real
Llama with a real peft LoRA, on the CPU (bitwise).  A recipe whose LoRA draws its
initial weights before the seeds are applied is refused; the documented path
(``load_pinned``, then ``get_peft_model``) passes; a non-deterministic operation
torch names is reported."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.preflight.preflight_test import LORA, _example

pytest.importorskip("peft")

SEEDED_TOO_LATE = """
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from ftmanifest.seeding import seed_everything

def recipe(r):
    def build(recipe):  # the LoRA is initialised first, the seeds applied after
        base = AutoModelForCausalLM.from_pretrained(recipe.model_folder)
        model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8,
                                                target_modules=["q_proj", "v_proj"]))
        seed_everything(recipe.manifest)
        return model
    r.build_model = build
    return r
"""

DOCUMENTED = """
import torch
from peft import LoraConfig, get_peft_model

from ftmanifest.integrations.pinned import load_pinned

def recipe(r):
    def build(recipe):  # load_pinned applies the seeds; the LoRA is initialised after
        base, _ = load_pinned(recipe.manifest_path, tokenizer=False)
        model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8,
                                                target_modules=["q_proj", "v_proj"]))
        scratch = torch.zeros(4)

        def note(module, args, output):  # an operation torch has no deterministic kernel for
            scratch.put_(torch.tensor([0]), torch.tensor([1.0]))

        model.register_forward_hook(note)
        return model
    r.build_model = build
    return r
"""


def test_a_lora_initialised_before_the_seeds_is_not_deterministic(tmp_path: Path) -> None:
    from ftmanifest.cli.preflight import _text
    from ftmanifest.preflight.checks import Options
    from ftmanifest.preflight.run import run_preflight

    loaded = _example(tmp_path, **LORA)
    hook = tmp_path / "late.py"
    hook.write_text(SEEDED_TOO_LATE)
    result = run_preflight(loaded, only=["determinism"], recipe_spec=f"{hook}:recipe",  # type: ignore[arg-type]
                           options=Options())  # fmt: skip
    row = result.rows[0]
    assert not row.ok and row.reason == "not-deterministic", row.summary
    # B starts at zero, so the first loss agrees; the different A shows from step 2 on
    assert "differ at step 2: loss" in row.summary
    first, second = row.figures["runs"]
    assert first["losses"][0] == second["losses"][0]
    assert first["losses"][1] != second["losses"][1] and first["digest"] != second["digest"]
    assert any("seeds are applied after the model" in d for d in row.details)
    text = " ".join(_text(result).split())  # the table wraps notes to the terminal's width
    assert f"run 1: losses {first['losses']}" in text and first["digest"][:23] in text
    assert f"run 2: losses {second['losses']}" in text and second["digest"][:23] in text


def test_the_documented_path_is_bitwise_deterministic_and_names_its_kernels(
    tmp_path: Path,
) -> None:
    # deterministic: false, so torch warns (and the row names) what strict mode would refuse
    loaded = _example(tmp_path, **LORA, **{"deterministic: true": "deterministic: false"})
    hook = tmp_path / "documented.py"
    hook.write_text(DOCUMENTED)
    manifest = Path(loaded.path)  # type: ignore[attr-defined]
    ledger = tmp_path / "ledger"
    out = run_cli("preflight", str(manifest), "--only", "determinism", "--recipe",
                  f"{hook}:recipe", "--ledger", str(ledger), "--format", "json")  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    row = json.loads(out.stdout)["rows"][0]
    assert row["ok"] and "reason" not in row, row
    first, second = row["figures"]["runs"]
    assert len(first["losses"]) == 3 and first["losses"] == second["losses"]
    assert first["digest"] == second["digest"] and first["digest"].startswith("sha256:")
    assert row["figures"]["compared"] == "bitwise"
    assert row["figures"]["kernels"] == ["put_"] == first["kernels"]
    assert any("non-deterministic kernels seen: put_" in d for d in row["details"])
    recorded = json.loads(Path(json.loads(out.stdout)["record"]).read_text())["record"]
    assert recorded["rows"][0]["figures"]["runs"] == [first, second]


def test_no_repeat_runs_once_and_says_it_compared_nothing(tmp_path: Path) -> None:
    loaded = _example(tmp_path, **LORA)
    out = run_cli("preflight", str(loaded.path), "--only", "determinism",  # type: ignore[attr-defined]
                  "--no-repeat", "--no-record")  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    shown = " ".join(out.stdout.split())  # the table wraps to the terminal's width
    assert "ran once in a fresh process (--no-repeat): not compared" in shown
    assert "run 1: losses [" in shown and "run 2" not in shown


def test_a_tolerance_forgives_last_bits_and_nothing_more(tmp_path: Path) -> None:
    import torch

    from ftmanifest.preflight.recipe import default_recipe
    from ftmanifest.preflight.repeat import CUDA_TOLERANCE, compare, first_steps

    run = first_steps(default_recipe(_example(tmp_path, **LORA)), torch.device("cpu"))
    assert compare(run, replace(run), None) is None
    name = next(iter(run.tensors))
    digest, norm, projection = run.tensors[name]
    nudged = replace(run, tensors={**run.tensors, name: ["sha256:other", norm * (1 + 1e-6),
                                                          projection]})  # fmt: skip
    assert compare(run, nudged, CUDA_TOLERANCE) is None
    bitwise = compare(run, nudged, None)
    assert bitwise is not None and bitwise.field == name and bitwise.reason == "not-deterministic"
    moved = replace(run, tensors={**run.tensors, name: [digest, norm * 1.01, projection]})
    far = compare(run, moved, CUDA_TOLERANCE)
    assert far is not None and far.field == name
    loss = replace(run, losses=[run.losses[0] * (1 + 1e-2), *run.losses[1:]])
    err = compare(run, loss, CUDA_TOLERANCE)
    assert err is not None and err.field == "step 1 loss"
