"""A warm start the manifest pins (``method.init_adapter``) trains; any other refuses.

A real ``transformers.Trainer`` with a real peft LoRA on the tiny example, on the CPU.
The unpinned warm start stays refused (``start_state_test``).
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.start_state import judge_start
from ftmanifest.manifest import load_manifest
from tests.integrations.start_state_test import _fresh, _guard, _lora_manifest
from tests.integrations.trainer_guard_test import example, locked, refused  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


def _saved(manifest: Path, folder: Path, seed: int) -> Path:
    """An adapter as an earlier run leaves it (lora_B trained), saved to ``folder``."""
    earlier = _fresh(manifest)
    with torch.no_grad():
        for name, param in earlier.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.02, generator=torch.Generator().manual_seed(seed))
    earlier.save_pretrained(folder)
    return folder / "adapter_model.safetensors"


def _pin(manifest: Path, weights: Path) -> None:
    digest = "sha256:" + hashlib.sha256(weights.read_bytes()).hexdigest()
    rel = weights.relative_to(manifest.parent).as_posix()
    pinned = f"  init_adapter:\n    path: {rel}\n    digest: {digest}\n"
    text = manifest.read_text("utf-8").replace("  alpha: 8\n", "  alpha: 8\n" + pinned)
    manifest.write_text(text, "utf-8")


def _loaded(manifest: Path, folder: Path) -> Any:
    from peft import PeftModel

    base = AutoModelForCausalLM.from_pretrained(manifest.parent / "model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return PeftModel.from_pretrained(base, folder, is_trainable=True)


def test_a_warm_start_from_the_pinned_adapter_trains(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = _lora_manifest(example)
    weights = _saved(manifest, manifest.parent / "start", seed=1)
    _pin(manifest, weights)
    assert load_manifest(manifest).manifest.method.init_adapter.path == "start/" + weights.name
    model = _loaded(manifest, weights.parent)
    trainer = tiny_trainer(manifest.parent, tmp_path / "out", [_guard(manifest)], model=model)
    trainer.train()
    assert trainer.state.global_step == 3


def test_a_warm_start_from_another_adapter_is_refused(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = _lora_manifest(example)
    _pin(manifest, _saved(manifest, manifest.parent / "start", seed=1))
    other = _saved(manifest, tmp_path / "other", seed=2).parent
    trainer = tiny_trainer(manifest.parent, tmp_path / "out", [_guard(manifest)],
                           model=_loaded(manifest, other))  # fmt: skip
    err = refused(trainer)
    (row,) = [f for f in err.report.findings if f.rule == "drift.warm-start"]
    assert (row.field, row.path) == ("method.init_adapter", str(manifest))
    assert "start/adapter_model.safetensors: sha256:" in row.expected
    assert "sha256:" in row.observed and "lora_B" in row.observed
    assert row.expected.split(": ")[-1] not in row.observed
    assert "init_adapter" in row.hint


def test_a_fresh_lora_or_an_edited_pin_is_refused(example: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = _lora_manifest(example)
    weights = _saved(manifest, manifest.parent / "start", seed=1)
    _pin(manifest, weights)
    loaded = load_manifest(manifest).manifest
    (row,) = judge_start(_fresh(manifest), loaded, str(manifest), resumed=False)
    assert row.field == "method.init_adapter" and "does not start" in row.message
    pinned = _loaded(manifest, weights.parent)
    assert judge_start(pinned, loaded, str(manifest), resumed=False) == []  # control
    weights.write_bytes(weights.read_bytes() + b" ")
    (row,) = judge_start(pinned, loaded, str(manifest), resumed=False)
    assert "changed since it was pinned" in row.message and "sha256:" in row.observed


def test_lint_validates_the_pinned_adapter(example: Path) -> None:  # noqa: F811
    from ftmanifest.lint import lint_paths

    manifest = _lora_manifest(example)
    text = manifest.read_text("utf-8").replace(
        "  alpha: 8\n", "  alpha: 8\n  init_adapter:\n    path: start/a.safetensors\n"
    )
    manifest.write_text(text, "utf-8")
    problems, _unusable = lint_paths([str(manifest)])
    assert [(p.field, p.message) for p in problems] == [
        ("method.init_adapter.digest", "missing required field")
    ]
