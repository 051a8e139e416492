"""Tracker links: a real Trainer reporting to a real MLflow (SQLite store)
or to W&B in offline mode; the guard tags the tracker's run with the manifest digest,
the experiment and the ledger attempt, and the attempt records the tracker's run id.

Each test trains the locked tiny example for its few steps on the CPU (seconds).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.transformers import RUN_RECORD, FtManifestCallback
from ftmanifest.ledger import Ledger, ledger_dir
from ftmanifest.ledger.attempts import attempts, find

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


def _need(module: str) -> Any:
    return pytest.importorskip(
        module,
        reason=f"{module} is not installed: pip install -e '.[trackers]' (or '.[dev]') "
        "to test the tracker links",
    )


def _train(manifest: Path, out: Path, report_to: list[str]) -> tuple[Any, FtManifestCallback]:
    guard = FtManifestCallback(manifest, signature=False)
    trainer = tiny_trainer(manifest.parent, out, [guard], report_to=report_to)
    trainer.train()
    return trainer, guard


def _attempt(manifest: Path, record: dict[str, Any]) -> Any:
    entries = Ledger(ledger_dir(manifest)).read().entries
    (attempt,) = find(attempts(entries), record["attempt"])
    return attempt


def _show(manifest: Path, attempt: str, capsys: pytest.CaptureFixture[str]) -> str:
    from ftmanifest.cli import main

    capsys.readouterr()
    assert main(["ledger", "show", attempt, "--manifest", str(manifest)]) == 0
    return capsys.readouterr().out


def test_mlflow_run_is_tagged_and_the_attempt_names_it(
    example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    mlflow = _need("mlflow")
    _need("sqlalchemy")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "ftmanifest-test")
    monkeypatch.setenv("DISABLE_MLFLOW_INTEGRATION", "FALSE")
    mlflow.set_tracking_uri(uri)
    out = tmp_path / "out"
    _, guard = _train(example, out, ["mlflow"])
    assert mlflow.active_run() is None  # the Trainer's MLflowCallback ended its run

    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    (link,) = record["trackers"]
    assert link["kind"] == "mlflow" and link["uri"] == uri
    run = MlflowClient(uri).get_run(link["run_id"])  # read back from the SQLite store
    assert guard.report is not None
    tags = run.data.tags
    assert tags["ftmanifest.digest"] == guard.report.manifest_digest
    assert tags["ftmanifest.experiment"] == record["experiment"]["id"]
    assert tags["ftmanifest.attempt"] == record["attempt"]
    assert link["experiment_id"] == run.info.experiment_id

    attempt = _attempt(example, record)
    assert attempt.to_dict()["trackers"] == [link]
    shown = _show(example, record["attempt"], capsys)
    assert f"tracker mlflow run {link['run_id']}" in shown and uri in shown


def test_wandb_offline_run_is_tagged_and_the_attempt_names_it(
    example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    wandb = _need("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_PROJECT", "ftmanifest-test")
    out = tmp_path / "out"
    try:
        _, guard = _train(example, out, ["wandb"])
        run = wandb.run
        assert run is not None
        config = dict(run.config)
    finally:
        wandb.finish()
        wandb.teardown()  # waits until the service has written the run file
    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    (link,) = record["trackers"]
    assert link["kind"] == "wandb" and link["run_id"] == run.id
    assert link["project"] == "ftmanifest-test" and link["mode"] == "offline"
    assert guard.report is not None
    assert config["ftmanifest.digest"] == guard.report.manifest_digest
    assert config["ftmanifest.experiment"] == record["experiment"]["id"]
    assert config["ftmanifest.attempt"] == record["attempt"]
    # what the offline run wrote to disk (what `wandb sync` uploads) carries the tags
    (log,) = tmp_path.glob(f"wandb/offline-run-*-{run.id}/run-{run.id}.wandb")
    data = log.read_bytes()
    assert b"ftmanifest.attempt" in data and record["attempt"].encode() in data
    assert guard.report.manifest_digest.encode() in data

    shown = _show(example, record["attempt"], capsys)
    assert f"tracker wandb run {run.id}" in shown


def test_without_a_tracker_the_record_has_no_link(example: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _train(example, out, [])
    record = json.loads((out / RUN_RECORD).read_text("utf-8"))
    assert record["trackers"] == []
    assert _attempt(example, record).to_dict()["trackers"] == []


def test_a_tracking_uri_with_credentials_is_recorded_without_them() -> None:
    from ftmanifest.integrations.trackers import public_uri

    assert public_uri("https://alice:s3cret@mlflow.example.com/x?token=abc") == (
        "https://mlflow.example.com/x"
    )
    assert public_uri("sqlite:////tmp/m.db") == "sqlite:////tmp/m.db"
    assert public_uri("databricks") == "databricks"


def test_lint_and_verify_do_not_import_the_trackers(example: Path) -> None:
    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"main(['lint', {str(example)!r}])\n"
        f"main(['verify', {str(example)!r}, '--no-signature'])\n"
        "print('TRACKERS', sorted(m for m in ('mlflow', 'wandb') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "TRACKERS []" in out.stdout, out.stdout + out.stderr
