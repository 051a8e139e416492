"""The Trainer guard under DDP: a real ``transformers.Trainer`` on two torchrun ranks
(gloo, CPU) trains when no rank drifted, and stops on every rank, naming rank 1,
when rank 1 did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.probe.packages import installed_distributions
from tests.distributed.launch import torchrun, two_rank_example
from tests.support.pins import pin

TRAIN = """\
import json, os
from pathlib import Path

rank = os.environ["RANK"]
os.environ.update(json.loads(os.environ["FTM_RANK_SPEC"]).get(rank, {}).get("env", {}))
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

from ftmanifest.examples.tiny import lm_examples
from ftmanifest.integrations.transformers import (
    DriftRefusedError, FtManifestCallback, training_arguments,
)

folder = Path(os.environ["FTM_PROJECT"])
out = Path(os.environ["FTM_OUT"])
guard = FtManifestCallback(folder / "manifest.yaml", signature=False, rank_timeout=60)
tok = AutoTokenizer.from_pretrained(folder / "model")
args = training_arguments(
    folder / "manifest.yaml", output_dir=str(out / "run"), use_cpu=True, ddp_backend="gloo",
    report_to=[], save_strategy="no", disable_tqdm=True, logging_strategy="no",
)
trainer = Trainer(
    model=AutoModelForCausalLM.from_pretrained(folder / "model"),
    args=args,
    train_dataset=lm_examples(folder / "data" / "train.jsonl", tok, seq_len=32),
    callbacks=[guard],
)
import torch.distributed as dist

result = {"distributed_by_trainer": dist.is_initialized(), "world": args.world_size}
try:
    trainer.train()
    result["trained_steps"] = trainer.state.global_step
except DriftRefusedError as exc:
    result.update(
        refused=type(exc).__name__,
        text=str(exc),
        ranks=sorted({str(f.extra.get("rank")) for f in exc.findings}),
        steps=trainer.state.global_step,
    )
(out / f"guard-{rank}.json").write_text(json.dumps(result))
"""


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_rank_example(tmp_path_factory.mktemp("example"))


def _train(locked: Path, tmp_path: Path, ranks: dict[str, Any]) -> dict[int, dict[str, Any]]:
    project = tmp_path / "p"
    shutil.copytree(locked.parent, project)
    pin(project / "manifest.yaml", allow=[str(tmp_path / "job")])  # the rank script's folder
    env = {"FTM_PROJECT": str(project), "FTM_RANK_SPEC": json.dumps(ranks)}
    job = torchrun(tmp_path / "job", TRAIN, env=env, timeout=180)
    results = {}
    for rank in (0, 1):
        path = tmp_path / "job" / f"guard-{rank}.json"
        assert path.exists(), job.log[-6000:]
        results[rank] = json.loads(path.read_text())
    return results


def test_a_ddp_run_with_no_drifted_rank_trains(locked: Path, tmp_path: Path) -> None:
    results = _train(locked, tmp_path, {})
    for rank in (0, 1):
        assert results[rank]["distributed_by_trainer"] and results[rank]["world"] == 2
        assert results[rank].get("trained_steps") == 3, results[rank]  # the manifest's
    record = json.loads((tmp_path / "job" / "run" / "ftmanifest-run.json").read_text())
    assert record["status"] == "completed" and record["findings"] == []
    assert record["trainer"]["world_size"] == 2


def test_one_drifted_rank_stops_the_job_on_every_rank(locked: Path, tmp_path: Path) -> None:
    version = installed_distributions()["torch"]
    forced = {"FTMANIFEST_TESTING": "1", "FTMANIFEST_TEST_PACKAGE_VERSIONS": f"torch={version}"}
    results = _train(locked, tmp_path, {"1": {"env": forced}})
    for rank in (0, 1):
        got = results[rank]
        assert got.get("refused") == "RanksRefusedError", got
        assert got["steps"] == 0  # before the first step
        assert got["ranks"] == ["1"]
        assert "refused before the first step on every rank: rank(s) 1" in got["text"]
        assert "rank 1 (" in got["text"] and "environment.packages.torch" in got["text"]
    record = json.loads((tmp_path / "job" / "run" / "ftmanifest-run.json").read_text())
    assert record["status"] == "refused"  # rank 0 keeps the refused attempt
    assert {f["field"] for f in record["findings"]} == {"environment.packages.torch"}
