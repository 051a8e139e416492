"""Two ledger messages that did not match what happened.

- ``ledger --manifest M`` is documented to beat ``$FTMANIFEST_LEDGER`` (an
  explicit flag beats the environment), but the variable won.
- A record from a clock two years ahead stamped every later record with its
  time, and ``ledger check`` stayed OK: a record dated in the future is now a
  problem naming it, and later records keep their own time.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ftmanifest.ledger import Ledger, store
from tests.conftest import CLF, run_cli
from tests.ledger.conftest import check_json, fill, rules


def test_the_manifest_flag_beats_the_ledger_environment_variable(tmp_path: Path) -> None:
    manifest = tmp_path / "project" / "m.yaml"
    manifest.parent.mkdir()
    shutil.copy(CLF, manifest)
    near = manifest.parent / ".ftmanifest" / "ledger"
    fill(Ledger(near), 1)
    other = tmp_path / "other-ledger"
    env = {"FTMANIFEST_LEDGER": str(other), "COLUMNS": "1000"}
    out = run_cli("ledger", "list", "--manifest", str(manifest), "--format", "json", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["ledger"] == str(near)
    # --ledger beats both; without a flag the variable is used
    out = run_cli("ledger", "list", "--ledger", str(tmp_path / "x"), "--manifest", str(manifest),
                  "--format", "json", env=env)  # fmt: skip
    assert json.loads(out.stdout)["ledger"] == str(tmp_path / "x")
    out = run_cli("ledger", "list", "--format", "json", env=env, cwd=tmp_path)
    assert json.loads(out.stdout)["ledger"] == str(other)


def _at(when: datetime) -> str:
    return when.isoformat(timespec="microseconds")


def test_a_record_from_the_future_is_a_problem_and_is_not_inherited(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(folder)
    fill(ledger, 1, attempt="before")
    ahead = datetime.now(timezone.utc) + timedelta(days=730)
    monkeypatch.setattr(store, "now", lambda: _at(ahead))
    (future,) = fill(ledger, 1, attempt="fast-clock")
    monkeypatch.undo()
    later = fill(ledger, 2, attempt="after")
    for entry in later:
        when = datetime.fromisoformat(entry.at)
        assert abs(when - datetime.now(timezone.utc)) < timedelta(minutes=5), entry.at
    code, report = check_json(folder)
    assert code == 1 and rules(report) == ["ledger.future"], report
    (problem,) = report["problems"]
    assert problem["file"] == str(future.file) and problem["observed"] == future.at
    assert problem["hint"]


def test_a_clock_a_little_behind_still_keeps_the_order(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the allowed skew a record ahead is no problem, and the next one
    (from a clock a little behind) still follows it in time."""
    ledger = Ledger(folder)
    ahead = datetime.now(timezone.utc) + timedelta(seconds=30)
    monkeypatch.setattr(store, "now", lambda: _at(ahead))
    (first,) = fill(ledger, 1, attempt="a")
    monkeypatch.undo()
    (second,) = fill(ledger, 1, attempt="b")
    assert second.at >= first.at
    assert check_json(folder) == (0, check_json(folder)[1])
