"""The recipe guard under ``accelerate launch`` with two CPU processes.

accelerate starts the ranks (its multi-process launcher over torch's elastic
agent, gloo on the CPU); each rank builds a real Trainer on the tiny example.
The manifest's own arguments train on both ranks; a script that sets its own
seed is refused before step 1 on every rank, naming ``seeds.torch``.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.launch import two_rank_example
from tests.support.pins import pin

ACCELERATE = Path(sys.executable).with_name("accelerate")

RANK = """\
import json, os, sys
from pathlib import Path
from transformers import TrainingArguments
from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.transformers import DriftRefusedError, FtManifestCallback
from ftmanifest.integrations.transformers import training_arguments

manifest, out, seed = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
quiet = dict(output_dir=str(out / "run"), use_cpu=True, ddp_backend="gloo", report_to=[],
             save_strategy="no", disable_tqdm=True, logging_strategy="no")
args = training_arguments(manifest, **quiet)
if seed != "manifest":  # a script's own arguments: the manifest's, with its own seed
    init = {k for k, f in TrainingArguments.__dataclass_fields__.items() if f.init}
    mine = {k: v for k, v in args.to_dict().items() if k in init and not k.endswith("_token")}
    args = TrainingArguments(**{**mine, "seed": int(seed)})
guard = FtManifestCallback(manifest, signature=False, rank_timeout=60)
trainer = tiny_trainer(manifest.parent, out / "run", [guard], args=args)
result = {"world": trainer.args.world_size}
try:
    trainer.train()
    result["steps"] = trainer.state.global_step
except DriftRefusedError as exc:
    result["refused"] = sorted({f.field for f in exc.findings if f.field})
    result["steps"] = trainer.state.global_step
(out / f"rank-{os.environ['RANK']}.json").write_text(json.dumps(result))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_rank_example(tmp_path_factory.mktemp("example"))


def _launch(locked: Path, tmp_path: Path, seed: str) -> dict[int, dict]:
    if not ACCELERATE.exists():
        pytest.skip("accelerate's launcher is not installed (pip install accelerate)")
    project = tmp_path / "p"
    shutil.copytree(locked.parent, project)
    script = tmp_path / "rank.py"
    script.write_text(RANK, "utf-8")
    pin(project / locked.name, allow=[str(script)])  # the harness's script, not the repo's
    argv = [str(ACCELERATE), "launch", "--multi_gpu", "--num_processes", "2",
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", str(_free_port()), str(script),
            str(project / locked.name), str(tmp_path), seed]  # fmt: skip
    job = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    results = {}
    for rank in (0, 1):
        path = tmp_path / f"rank-{rank}.json"
        assert path.exists(), (job.stdout + job.stderr)[-6000:]
        results[rank] = json.loads(path.read_text("utf-8"))
    return results


def test_the_manifest_recipe_trains_on_both_ranks(locked: Path, tmp_path: Path) -> None:
    results = _launch(locked, tmp_path, "manifest")
    for rank in (0, 1):
        assert results[rank] == {"world": 2, "steps": 3}, results[rank]


def test_a_seed_of_its_own_is_refused_on_every_rank(locked: Path, tmp_path: Path) -> None:
    results = _launch(locked, tmp_path, "42")
    for rank in (0, 1):
        got = results[rank]
        assert got["steps"] == 0 and "seeds.torch" in got.get("refused", []), got
