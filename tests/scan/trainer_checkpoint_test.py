"""Real torch.save artifacts and a real Trainer checkpoint scan clean.

These files are where the pickle allowlist (ftmanifest.scan.artifacts.pickle_allowlist)
came from: if a torch/transformers upgrade starts pickling a new global, this
test names it.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from ftmanifest.findings import Finding
from ftmanifest.scan.artifacts.binary import BINARY_FORMATS, scan_binary
from ftmanifest.scan.artifacts.sniff import detect_format

TOKEN = "hf_" + "upA9Z0bLxxnf6CwiSQZmwKxLkSOCdOXRw9"  # random: typed runs are placeholders


def _scan(path: Path) -> list[Finding]:
    from ftmanifest.scan.text.text import scan_text

    fmt = detect_format(path)
    assert fmt in BINARY_FORMATS, (path, fmt)
    return scan_binary(path, fmt, scan_text)


def _problems(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.rule, f.message) for f in findings if f.severity != "info"]


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two steps of a real Trainer on a tiny GPT-2 built from a config."""
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("trainer")
    config = GPT2Config(
        n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=16, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    rows = [torch.tensor([(i * 7 + j) % 100 for j in range(8)]) for i in range(8)]
    data = [{"input_ids": r, "labels": r} for r in rows]
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=2,
        save_steps=2,
        per_device_train_batch_size=4,
        use_cpu=True,
        report_to=[],
        hub_token=TOKEN,
        disable_tqdm=True,
    )
    Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=data).train()
    folder = out / "checkpoint-2"
    assert folder.is_dir()
    return folder


def test_trainer_checkpoint_scans_clean(checkpoint: Path) -> None:
    names = {p.name for p in checkpoint.iterdir()}
    assert {"optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"} <= names
    for path in sorted(checkpoint.iterdir()):
        fmt = detect_format(path)
        if fmt not in BINARY_FORMATS:
            continue
        found = _scan(path)
        if path.name == "training_args.bin":
            found = [f for f in found if f.kind != "secret"]
        assert _problems(found) == [], path.name


def test_training_args_token_found_with_real_scan_text(checkpoint: Path) -> None:
    found = _scan(checkpoint / "training_args.bin")
    secrets = [f for f in found if f.kind == "secret"]
    assert secrets, found
    assert secrets[0].extra["member"].endswith("data.pkl")
    assert isinstance(secrets[0].extra["offset"], int)
    assert all(TOKEN not in f"{f.message} {f.excerpt} {f.to_dict()}" for f in found)


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Embedding(5, 4))


def test_torch_save_artifacts_scan_clean(tmp_path: Path) -> None:
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model[1](model[0](torch.randn(2, 4))).sum().backward()
    opt.step()
    files = {
        "tensor.pt": torch.ones(3),
        "optimizer.pt": opt.state_dict(),
        "sgd.pt": torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9).state_dict(),
        "rng_state.pth": {
            "python": random.getstate(),
            "numpy": np.random.get_state(),
            "cpu": torch.random.get_rng_state(),
        },
        "mixed.pt": {
            "p": nn.Parameter(torch.ones(2)),
            "h": torch.ones(2, dtype=torch.half),
            "bf": torch.ones(2, dtype=torch.bfloat16),
            "i": torch.arange(3),
            "dtype": torch.float16,
            "device": torch.device("cpu"),
            "size": torch.Size([2, 3]),
            "np": np.float64(1.5),
            "arr": np.arange(3),
            "set": {1, 2},
        },
    }
    schedulers = {
        "step": torch.optim.lr_scheduler.StepLR(opt, 2),
        "cosine": torch.optim.lr_scheduler.CosineAnnealingLR(opt, 10),
        "onecycle": torch.optim.lr_scheduler.OneCycleLR(opt, 1e-2, total_steps=10),
        "lambda": torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0),
    }
    files.update({f"sched_{k}.pt": s.state_dict() for k, s in schedulers.items()})
    for name, obj in files.items():
        for legacy in (False, True):
            path = tmp_path / (("legacy_" if legacy else "") + name)
            torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
            assert detect_format(path) == ("torch-legacy" if legacy else "torch-zip")
            assert _problems(_scan(path)) == [], path.name
            assert not any(f.rule == "pickle.weights-as-pickle" for f in _scan(path)), name
    np.save(tmp_path / "ok.npy", np.array([{"a": 1}, "x"], dtype=object), allow_pickle=True)
    assert _scan(tmp_path / "ok.npy") == []


@pytest.mark.parametrize("legacy", [False, True])
def test_state_dict_is_weights_as_pickle_info(tmp_path: Path, legacy: bool) -> None:
    path = tmp_path / "pytorch_model.bin"
    torch.save(_model().state_dict(), path, _use_new_zipfile_serialization=not legacy)
    found = _scan(path)
    assert [(f.rule, f.severity) for f in found] == [("pickle.weights-as-pickle", "info")]
