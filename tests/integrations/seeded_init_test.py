"""The documented path is deterministic by construction: ``load_pinned`` applies the
pinned seeds as it hands the model over, so the LoRA that ``get_peft_model``
initialises next is the same whatever the script drew before."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from peft import get_peft_model

from ftmanifest.integrations.builders import lora_config
from ftmanifest.integrations.transformers import load_pinned
from tests.integrations.trainer_guard_test import example, locked  # noqa: F401

LORA = "method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj, v_proj]\n"


def _lora_a(manifest: Path, drawn_before: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(drawn_before)  # what the script did before: another state each run
    torch.rand(drawn_before)
    model, _ = load_pinned(manifest, tokenizer=False)
    peft_model = get_peft_model(model, lora_config(manifest))
    return {k: v.detach().clone() for k, v in peft_model.state_dict().items() if "lora_A" in k}


@pytest.fixture
def process_state() -> Iterator[None]:
    """The switches seed_everything sets for the process, restored for the next test."""
    cublas = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    before = torch.are_deterministic_algorithms_enabled()
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    yield
    if cublas is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = cublas
    torch.use_deterministic_algorithms(before)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn


def test_the_lora_initialised_after_load_pinned_is_the_same_every_run(
    example: Path,  # noqa: F811
    process_state: None,
) -> None:
    example.write_text(example.read_text("utf-8").replace("method:\n  kind: full\n", LORA))
    first, second = _lora_a(example, 1), _lora_a(example, 2)
    assert first and first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)  # before: two other inits
