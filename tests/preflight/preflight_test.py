"""``ftmanifest preflight`` on tiny real models (a Llama-like and a GPT-2-like causal LM
with a tokenizer trained by ``tokenizers``), on the CPU: every check passes on a
correct recipe, and each broken recipe fails its own row."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytest.importorskip("peft")

BROKEN_LABELS = """
from ftmanifest.preflight.recipe import Example, default_format

def recipe(r):
    def fmt(record, tokenizer, seq_len, loss_on):
        ex = default_format(record, tokenizer, seq_len, loss_on)
        return Example(ex.input_ids, list(ex.input_ids), ex.prompt_len, ex.completion_len)
    r.format = fmt
    return r
"""

LOSES_OPTIMIZER = """
from ftmanifest.preflight.recipe import default_save

def recipe(r):
    def save(model, optimizer, folder):  # saves a fresh optimizer: its state is lost
        default_save(model, r.make_optimizer(model, r), folder)
    r.save = save
    return r
"""

UNSEEDED = """
import random

import torch

from ftmanifest.preflight.recipe import default_build_model

def recipe(r):
    def build(recipe):  # noise from the OS, not from the manifest's seeds
        model = default_build_model(recipe)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(random.SystemRandom().random() * 1e-3)
        return model
    r.build_model = build
    return r
"""

NOT_FROZEN = """
from transformers import AutoModelForCausalLM

def recipe(r):
    def build(recipe):  # forgets method.frozen_modules
        return AutoModelForCausalLM.from_pretrained(recipe.model_folder)
    r.build_model = build
    return r
"""


def _example(tmp_path: Path, arch: str = "llama", **edits: str) -> object:
    from ftmanifest.examples.project import build_example
    from ftmanifest.manifest import load_manifest

    path = build_example(tmp_path / arch, arch=arch)  # type: ignore[arg-type]
    text = path.read_text()
    for old, new in edits.items():
        assert old.replace("_", " ") in text or old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return load_manifest(path)


def _rows(loaded: object, **kw: object) -> dict[str, object]:
    from ftmanifest.preflight.checks import Options
    from ftmanifest.preflight.run import run_preflight

    kw.setdefault("options", Options(throughput_seconds=0.5))
    return {r.name: r for r in run_preflight(loaded, **kw).rows}  # type: ignore[arg-type]


# A random tiny model's attention barely moves its logits, so the LoRA recipes also
# train the output layer (an extra saved layer, as a classification recipe does).
LORA = {"method:\n  kind: full\n": "method:\n  kind: lora\n  r: 4\n  alpha: 8\n"
        "  target_modules: [q_proj, v_proj]\n  modules_to_save: [lm_head]\n"}  # fmt: skip
LORA_GPT2 = {"method:\n  kind: full\n": "method:\n  kind: lora\n  r: 4\n  alpha: 8\n"
             "  target_modules: [c_attn]\n  modules_to_save: [lm_head]\n"}  # fmt: skip


@pytest.mark.parametrize(
    ("arch", "edits"),
    [("llama", {}), ("gpt2", {}), ("llama", LORA), ("gpt2", LORA_GPT2)],
    ids=["llama-full", "gpt2-full", "llama-lora", "gpt2-lora"],
)
def test_every_check_passes_on_a_correct_recipe(
    tmp_path: Path, arch: str, edits: dict[str, str]
) -> None:
    rows = _rows(_example(tmp_path, arch, **edits))
    failed = {n: (r.summary, r.details) for n, r in rows.items() if not r.ok}  # type: ignore[attr-defined]
    assert failed == {}
    assert list(rows) == ["stack", "disk", "tokens", "step", "update", "overfit", "resume",
                          "determinism", "throughput"]  # fmt: skip
    step = rows["step"].figures  # type: ignore[attr-defined]
    assert step["peak_host_bytes"] > 0 and step["loss"] > 0
    tokens = rows["tokens"].figures  # type: ignore[attr-defined]
    assert set(tokens["categories"]) == {"billing", "shipping", "returns", "technical", "account"}
    first = tokens["rendered"][0]["tokens"]
    assert [t["loss"] for t in first] == [not t["prompt"] for t in first]  # completion only


def test_loss_on_the_prompt_fails_the_tokens_row(tmp_path: Path) -> None:
    hook = tmp_path / "broken.py"
    hook.write_text(BROKEN_LABELS)
    rows = _rows(_example(tmp_path), recipe_spec=f"{hook}:recipe", only=["tokens"])
    assert not rows["tokens"].ok  # type: ignore[attr-defined]
    assert "loss covers the prompt" in rows["tokens"].summary  # type: ignore[attr-defined]


def test_truncation_that_loses_the_target_fails_the_tokens_row(tmp_path: Path) -> None:
    rows = _rows(_example(tmp_path, **{"seq_len: 32": "seq_len: 8"}), only=["tokens"])
    assert not rows["tokens"].ok  # type: ignore[attr-defined]
    assert "lose their target to truncation at seq_len 8" in rows["tokens"].summary  # type: ignore[attr-defined]


def test_lora_on_a_module_the_model_lacks_fails_stack_and_step(tmp_path: Path) -> None:
    edits = {"method:\n  kind: full\n": "method:\n  kind: lora\n  r: 4\n  alpha: 8\n"
             "  target_modules: [no_such_proj]\n"}  # fmt: skip
    rows = _rows(_example(tmp_path, **edits), only=["stack", "step"])
    assert not rows["stack"].ok and "no_such_proj" in rows["stack"].summary  # type: ignore[attr-defined]
    assert not rows["step"].ok and "could not run" in rows["step"].summary  # type: ignore[attr-defined]


def test_a_frozen_layer_that_changes_fails_the_update_row(tmp_path: Path) -> None:
    frozen = {"method:\n  kind: full\n": "method:\n  kind: full\n"
              "  frozen_modules: [model.layers.0]\n"}  # fmt: skip
    loaded = _example(tmp_path, **frozen)
    assert _rows(loaded, only=["update"])["update"].ok  # type: ignore[attr-defined]
    hook = tmp_path / "unfrozen.py"
    hook.write_text(NOT_FROZEN)
    row = _rows(loaded, recipe_spec=f"{hook}:recipe", only=["update"])["update"]
    assert not row.ok  # type: ignore[attr-defined]
    assert any("changed but should not: model.layers.0." in d for d in row.details)  # type: ignore[attr-defined]


def test_an_unreachable_overfit_loss_fails_the_overfit_row(tmp_path: Path) -> None:
    from ftmanifest.preflight.checks import Options

    options = Options(overfit_steps=2, throughput_seconds=0.5)
    row = _rows(_example(tmp_path), only=["overfit"], options=options)["overfit"]
    assert not row.ok and "did not fall below" in row.summary  # type: ignore[attr-defined]
    # it says what it trained with, so a slow optimizer can be told from a broken recipe
    assert re.search(r"with \w+ at lr [0-9.e-]+ \(from ", row.summary), row.summary  # type: ignore[attr-defined]
    assert row.figures["optimizer"] and row.figures["lr_from"]  # type: ignore[attr-defined]


def test_preflight_runs_on_the_device_the_backend_names() -> None:
    from ftmanifest.cli.preflight import device_for

    assert [device_for(k) for k in ("cuda", "rocm", "mps", "cpu", None)] == [
        "cuda", "cuda", "mps", "cpu", "cpu",
    ]  # fmt: skip


def test_cli_records_the_result_and_writes_html(tmp_path: Path) -> None:
    loaded = _example(tmp_path)
    manifest = Path(loaded.path)  # type: ignore[attr-defined]
    page = tmp_path / "tokens.html"
    ledger = tmp_path / "ledger"
    out = run_cli("preflight", str(manifest), "--only", "tokens", "--only", "step",
                  "--html", str(page), "--ledger", str(ledger), "--format", "json")  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert [r["name"] for r in doc["rows"]] == ["tokens", "step"] and doc["ok"]
    record = json.loads(Path(doc["record"]).read_text())["record"]
    assert record["status"] == "preflight" and record["ok"] is True
    assert record["recipe_digest"].startswith("sha256:")
    assert "rendered" not in record["rows"][0]["figures"]
    html = page.read_text()
    assert "Content-Security-Policy" in html and 'class="loss"' in html
    key = tmp_path / "k"
    assert run_cli("keygen", "-f", str(key), "--no-passphrase").returncode == 0
    signed = run_cli("preflight", str(manifest), "--only", "stack", "--ledger", str(ledger),
                     "--key", str(key), "--format", "json")  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    assert json.loads(Path(json.loads(signed.stdout)["record"]).read_text())["signature"]
    bad = run_cli("preflight", str(manifest), "--only", "nope")
    assert bad.returncode == 2 and "no preflight check named 'nope'" in bad.stderr


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf", "3601"])
def test_a_throughput_window_that_is_no_duration_is_a_usage_error(
    tmp_path: Path, seconds: str
) -> None:
    manifest = tmp_path / "m.yaml"  # refused before the manifest is read
    bad = run_cli("preflight", str(manifest), "--only", "throughput",
                  "--throughput-seconds", seconds)  # fmt: skip
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "--throughput-seconds must be in (0, 3600]" in bad.stderr
    assert f"observed: {float(seconds)}" in bad.stderr, bad.stderr


def test_a_throughput_window_that_is_no_number_is_a_usage_error_too(tmp_path: Path) -> None:
    bad = run_cli("preflight", str(tmp_path / "m.yaml"), "--throughput-seconds", "soon")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "--throughput-seconds" in bad.stderr and "Traceback" not in bad.stderr
    huge = run_cli("preflight", str(tmp_path / "m.yaml"), "--throughput-seconds", "1e400")
    assert huge.returncode == 2 and "observed: inf" in huge.stderr, huge.stderr  # overflows


def test_a_resume_that_loses_the_optimizer_state_fails_the_resume_row(tmp_path: Path) -> None:
    loaded = _example(tmp_path)
    hook = tmp_path / "loses.py"
    hook.write_text(LOSES_OPTIMIZER)
    row = _rows(loaded, recipe_spec=f"{hook}:recipe", only=["resume"])["resume"]
    assert not row.ok  # type: ignore[attr-defined]
    assert "the optimizer state was not restored" in row.summary  # type: ignore[attr-defined]


def test_an_unseeded_recipe_fails_the_determinism_row_and_names_the_flags(
    tmp_path: Path,
) -> None:
    hook = tmp_path / "unseeded.py"
    hook.write_text(UNSEEDED)
    row = _rows(_example(tmp_path), recipe_spec=f"{hook}:recipe", only=["determinism"])
    det = row["determinism"]
    assert not det.ok and "differ at step 1: loss" in det.summary  # type: ignore[attr-defined]
    assert det.reason == "not-deterministic"  # type: ignore[attr-defined]
    assert any("use_deterministic_algorithms" in d for d in det.details)  # type: ignore[attr-defined]


def test_verify_reports_a_missing_or_stale_preflight(tmp_path: Path) -> None:
    from ftmanifest.ledger import Ledger
    from ftmanifest.manifest import load_manifest
    from ftmanifest.preflight.run import record, run_preflight
    from ftmanifest.verify import verify_manifest

    loaded = _example(tmp_path)
    manifest = Path(loaded.path)  # type: ignore[attr-defined]
    ledger = tmp_path / "ledger"

    def said() -> list[str]:
        report = verify_manifest(manifest, signature=False, ledger=ledger, scan=False)
        return [w for w in report.warnings if w.startswith("preflight")]

    assert said()[0].startswith("preflight missing: no passing preflight of 'docroute-tiny'")
    result = run_preflight(loaded, only=["tokens"])  # type: ignore[arg-type]
    report = verify_manifest(manifest, signature=False, ledger=ledger, scan=False)
    Ledger(ledger).append(record(loaded, result, report.environment))
    assert said() == []
    # recorded on another machine: another platform
    other = record(loaded, result, report.environment)
    other["environment"]["platform"]["kind"] = "cuda"
    Ledger(ledger).append(other)
    assert "the platform changed (kind)" in said()[0]
    Ledger(ledger).append(record(loaded, result, report.environment))
    assert said() == []
    manifest.write_text(manifest.read_text().replace("seq_len: 32", "seq_len: 48"))
    assert load_manifest(manifest).manifest.training.seq_len == 48
    assert said()[0].startswith("preflight stale: the recipe changed")


@pytest.mark.parametrize(
    ("policy", "ok"), [("block-diagonal", True), ("none", False)], ids=["block", "none"]
)
def test_packing_is_checked_for_isolation(tmp_path: Path, policy: str, ok: bool) -> None:
    edits = {
        "  max_steps: 3\n": f"  max_steps: 3\n  packing: {{enabled: true, mask_policy: {policy}}}\n"
    }
    row = _rows(_example(tmp_path, **edits), only=["tokens"])["tokens"]
    assert row.figures["packing"]["isolated"] is ok  # type: ignore[attr-defined]
    assert row.ok is ok  # type: ignore[attr-defined]
    if not ok:
        assert "packed examples attend to each other" in row.summary  # type: ignore[attr-defined]


def test_the_step_runs_in_the_manifests_precision_with_checkpointing(tmp_path: Path) -> None:
    edits = {"precision: fp32": "precision: bf16\n  activation_checkpointing: true"}
    row = _rows(_example(tmp_path, **edits), only=["step", "update"])
    step = row["step"].figures  # type: ignore[attr-defined]
    assert row["step"].ok and row["update"].ok  # type: ignore[attr-defined]
    assert step["precision"] == "bf16" and step["activation_checkpointing"] is True


def test_fp8_on_a_device_without_it_fails_the_stack_row(tmp_path: Path) -> None:
    row = _rows(_example(tmp_path, **{"precision: fp32": "precision: fp8"}), only=["stack"])
    assert not row["stack"].ok  # type: ignore[attr-defined]
    assert "fp8 needs a CUDA device with compute capability 8.9" in row["stack"].summary  # type: ignore[attr-defined]
