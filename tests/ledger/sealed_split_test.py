"""The sealed test split and the budget, as the ledger records them.

A sealed split is scored only through a use ``unseal`` recorded; a second use
by the experiment's family is recorded and warned about in ``unseal``,
``verify`` and ``audit``; an attempt that spent more than
``experiment.budget`` is flagged in ``verify`` and ``audit``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import ENV, run_cli
from tests.results.conftest import write_predictions


def _predictions(folder: Path, split: str = "test") -> Path:
    """Predictions of the project's one-record split (no id key: record 1)."""
    label = {"test": "account", "eval": "returns"}[split]
    return write_predictions(folder / f"{split}-preds.jsonl", [(1, label, label)])


def _score(project: Path, preds: Path, out: Path) -> object:
    return run_cli("score", "--manifest", str(project), "--split", "test",
                   "--predictions", str(preds), "--out", str(out), env=ENV)  # fmt: skip


def _unseal(project: Path, reason: str = "final report") -> object:
    return run_cli("unseal", str(project), "--split", "test", "--reason", reason, env=ENV)


def _ledger(project: Path) -> list[dict]:
    out = run_cli("ledger", "list", "--manifest", str(project), "--format", "json", env=ENV)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["attempts"]


def test_scoring_a_sealed_split_without_unseal_is_refused(project: Path, tmp_path: Path) -> None:
    preds = _predictions(tmp_path)
    out = tmp_path / "test.results.json"
    refused = _score(project, preds, out)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "scored without a recorded use" in refused.stderr
    assert "ftmanifest unseal" in refused.stderr
    assert not out.exists()
    # the eval split is not sealed: scoring it needs nothing
    ok = run_cli("score", "--manifest", str(project), "--split", "eval", "--predictions",
                 str(_predictions(tmp_path, "eval")), "--out", str(tmp_path / "e.json"),
                 env=ENV)  # fmt: skip
    assert ok.returncode == 0, ok.stderr


def test_unseal_prints_the_path_records_the_use_and_score_consumes_it(
    project: Path, tmp_path: Path
) -> None:
    first = _unseal(project)
    assert first.returncode == 0, first.stderr
    assert Path(first.stdout.strip()) == project.parent / "data" / "test.jsonl"
    assert "use 1 by this experiment's family" in first.stderr
    assert "warning" not in first.stderr
    preds = _predictions(tmp_path)
    out = tmp_path / "test.results.json"
    scored = _score(project, preds, out)
    assert scored.returncode == 0, scored.stderr
    assert out.is_file()
    # that use is spent: scoring again needs a new one
    again = _score(project, preds, tmp_path / "again.json")
    assert again.returncode == 1
    assert "1 use(s), 1 already scored" in again.stderr
    second = _unseal(project, "reviewer asked for a rerun")
    assert second.returncode == 0
    assert "warning: sealed split test used 2 times" in second.stderr
    assert _score(project, preds, tmp_path / "third.json").returncode == 0
    uses = [a for a in _ledger(project) if a["attempt"].startswith("u-")]
    assert [a["status"] for a in uses] == ["scored", "scored"]
    assert [a["reason"] for a in uses] == ["final report", "reviewer asked for a rerun"]
    verify = run_cli("verify", str(project), "--no-signature", "--format", "json", env=ENV)
    report = json.loads(verify.stdout)
    assert report["ledger"]["sealed"]["test"]["family_uses"] == 2
    assert any("sealed split 'test' used 2 times" in w for w in report["warnings"])


def test_uses_count_across_the_family(project: Path) -> None:
    assert _unseal(project).returncode == 0
    variant = project.with_name("variant.yaml")
    text = project.read_text().replace(
        "id: docroute-lora-r16", "id: docroute-v2\n  parent: docroute-lora-r16", 1
    )
    variant.write_text(text)
    used = _unseal(variant, "variant's final number")
    assert used.returncode == 0, used.stderr
    assert "use 2 by this experiment's family" in used.stderr
    assert "warning: sealed split test used 2 times" in used.stderr
    # an unrelated experiment (another root) starts its own count
    other = project.with_name("other.yaml")
    other.write_text(project.read_text().replace("id: docroute-lora-r16", "id: unrelated", 1))
    alone = _unseal(other)
    assert alone.returncode == 0 and "use 1 by" in alone.stderr


def test_unseal_refuses_an_unsealed_split_and_changed_data(project: Path) -> None:
    plain = run_cli("unseal", str(project), "--split", "eval", "--reason", "x", env=ENV)
    assert plain.returncode == 2 and "is not sealed" in plain.stderr
    blank = run_cli("unseal", str(project), "--split", "test", "--reason", "  ", env=ENV)
    assert blank.returncode == 2 and "needs a reason" in blank.stderr
    with (project.parent / "data" / "test.jsonl").open("a") as fh:
        fh.write('{"text": "a late addition", "label": "billing"}\n')
    changed = _unseal(project)
    assert changed.returncode == 1 and "not the data the manifest pins" in changed.stderr
    assert _ledger(project) == []  # nothing recorded


def test_an_attempt_over_budget_is_flagged_in_verify(project: Path) -> None:
    text = project.read_text().replace(
        "max_gpu_hours: 2.5", "max_gpu_hours: 2.5\n    max_hours: 0.000001"
    )
    project.write_text(text)
    nap = (sys.executable, "-c", "import time; time.sleep(0.2)")
    ran = run_cli("run", str(project), "--no-signature", "--", *nap, env=ENV)
    assert ran.returncode == 0, ran.stderr
    [attempt] = _ledger(project)
    assert attempt["status"] == "completed"
    assert attempt["budget_used"]["hours"] > 0.000001
    verify = run_cli("verify", str(project), "--no-signature", env=ENV)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "went over experiment.budget: hours" in verify.stderr
    assert "ledger:    1 attempt(s): 1 completed" in verify.stdout
    assert "1 over budget" in verify.stdout
