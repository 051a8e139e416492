"""A real transformers Trainer, on the CPU, guarded by FtManifestCallback."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from transformers import Trainer

import ftmanifest
from ftmanifest.errors import EXIT_REFUSED, RefusedError
from ftmanifest.examples.project import build_example
from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.transformers import (
    RUN_RECORD,
    DriftRefusedError,
    FtManifestCallback,
)
from ftmanifest.verify import DriftError
from ftmanifest.verify.lock import lock_manifest


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny example, locked to this machine once for the module."""
    manifest = build_example(tmp_path_factory.mktemp("example"), arch="llama", seed=0)
    lock_manifest(manifest)
    return manifest


@pytest.fixture
def example(locked: Path, tmp_path: Path) -> Iterator[Path]:
    """A private copy of the locked example (each test may damage its own)."""
    folder = tmp_path / "ex"
    shutil.copytree(locked.parent, folder)
    with torch.random.fork_rng(devices=[]):
        yield folder / locked.name


def _trainer(manifest: Path, out: Path, **options: object) -> tuple[Trainer, FtManifestCallback]:
    guard = FtManifestCallback(manifest, signature=False, **options)  # type: ignore[arg-type]
    return tiny_trainer(manifest.parent, out, [guard]), guard


def _weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def refused(trainer: Trainer) -> DriftRefusedError:
    """Train; the guard must refuse before any optimizer step (no weight moved)."""
    before = _weights(trainer)
    with pytest.raises(DriftRefusedError) as err:
        trainer.train()
    assert trainer.state.global_step == 0
    after = _weights(trainer)
    assert all(torch.equal(before[k], after[k]) for k in before)
    return err.value


def _flip_one_byte(path: Path) -> None:
    """Change one byte, keeping JSON lines parseable: a letter to upper case."""
    data = bytearray(path.read_bytes())
    at = data.index(b"department")
    data[at] = ord("D")
    path.write_bytes(bytes(data))


def test_clean_manifest_trains_and_writes_the_run_record(example: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    trainer, guard = _trainer(example, out)
    before = _weights(trainer)
    trainer.train()
    assert trainer.state.global_step == 3
    after = _weights(trainer)
    assert any(not torch.equal(before[k], after[k]) for k in before)

    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    assert record["status"] == "completed"
    assert record["start_global_step"] == 0 and record["final_global_step"] == 3
    assert record["manifest"]["path"] == example.name  # relative to its project
    assert guard.report is not None
    assert record["manifest"]["digest"] == guard.report.manifest_digest
    assert record["manifest"]["digest"].startswith("sha256:")
    assert record["ftmanifest_version"] == ftmanifest.__version__
    assert record["environment"]["backend"]["kind"] == "cpu"
    assert record["environment"]["packages"]["transformers"].startswith("==")
    assert record["findings"] == [] and record["accepted"] == []
    assert record["started_at"] <= record["finished_at"]
    assert record["signature_checked"] is False
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temp files


def test_one_changed_data_byte_refuses_before_any_step(example: Path, tmp_path: Path) -> None:
    _flip_one_byte(example.parent / "data" / "train.jsonl")
    out = tmp_path / "out"
    trainer, _ = _trainer(example, out)
    before = _weights(trainer)
    with pytest.raises(DriftRefusedError) as err:
        trainer.train()
    assert isinstance(err.value, DriftError) and isinstance(err.value, RefusedError)
    assert err.value.exit_code == EXIT_REFUSED
    text = str(err.value)
    assert text.startswith("training refused before the first step")
    assert "data[0].digest" in text and "expected" in text and "observed" in text
    assert err.value.hint and "accept=" in err.value.hint
    assert [f.field for f in err.value.report.findings] == ["data[0].digest"]
    assert trainer.state.global_step == 0
    after = _weights(trainer)
    assert all(torch.equal(before[k], after[k]) for k in before)  # no optimizer step ran

    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    assert record["status"] == "refused" and record["final_global_step"] is None
    assert [f["field"] for f in record["findings"]] == ["data[0].digest"]


def test_changed_model_weights_refuse(example: Path, tmp_path: Path) -> None:
    trainer, _ = _trainer(example, tmp_path / "out")  # loads the weights before they change
    weights = example.parent / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # one bit of the last weight
    weights.write_bytes(bytes(data))
    with pytest.raises(DriftRefusedError) as err:
        trainer.train()
    fields = {f.field for f in err.value.report.findings}
    assert any(f and f.startswith("model.") for f in fields), fields
    assert trainer.state.global_step == 0


def test_an_accepted_drift_trains_and_is_recorded(example: Path, tmp_path: Path) -> None:
    _flip_one_byte(example.parent / "data" / "eval.jsonl")
    out = tmp_path / "out"
    reason = "eval split re-exported; reviewed"
    trainer, _ = _trainer(example, out, accept={"data[1].digest": reason})
    trainer.train()
    assert trainer.state.global_step == 3
    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    assert record["status"] == "completed"
    assert [(a["field"], a["reason"]) for a in record["accepted"]] == [("data[1].digest", reason)]
    from ftmanifest.ledger.runrecord import read

    beside = read(example)
    assert [r["status"] for r in beside] == ["started", "completed"]
    assert beside[0]["accepted"][0]["reason"] == reason
    assert beside[0]["manifest"]["digest"] == record["manifest"]["digest"]
