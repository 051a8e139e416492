"""``ledger abandon|invalidate ID --reason TEXT``: a person's mark on an attempt,
named by its attempt id (or a prefix), a record id prefix or its experiment id."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.ledger import Ledger
from tests.ledger.conftest import check_json, ledger_cli

ONE_OLD, ONE_NEW, TWO = "4f1c2a9b7d01", "9e8d7c6b5a40", "c0ffee123456"


@pytest.fixture
def store(folder: Path) -> Ledger:
    """exp-one: an attempt that completed, then one that started; exp-two: one attempt."""
    s = Ledger(folder)
    for attempt, experiment, statuses in (
        (ONE_OLD, "exp-one", ("started", "completed")),
        (ONE_NEW, "exp-one", ("started",)),
        (TWO, "exp-two", ("started", "failed")),
    ):
        for status in statuses:
            s.append({
                "status": status, "attempt": attempt,
                "experiment": {"id": experiment, "parent": None},
                "manifest": {"digest": "sha256:" + attempt * 5 + "abcd"},
            })  # fmt: skip
    return s


def _attempts(folder: Path) -> dict[str, dict[str, Any]]:
    out = ledger_cli(folder, "list", "--format", "json")
    assert out.returncode == 0, out.stdout + out.stderr
    return {a["attempt"]: a for a in json.loads(out.stdout)["attempts"]}


def _files(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def test_abandon_by_attempt_id_prefix(store: Ledger) -> None:
    assert _attempts(store.root)[ONE_NEW]["status"] == "unfinished"
    out = ledger_cli(store.root, "abandon", ONE_NEW[:4], "--reason", "  loss diverged  ")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"abandoned: attempt {ONE_NEW} (exp-one): loss diverged" in out.stdout
    rows = _attempts(store.root)
    assert (rows[ONE_NEW]["status"], rows[ONE_NEW]["reason"]) == ("abandoned", "loss diverged")
    assert rows[ONE_OLD]["status"] == "completed" and rows[TWO]["status"] == "failed"
    mark = store.read().entries[-1].record
    assert mark["experiment"] == {"id": "exp-one", "parent": None}
    assert mark["manifest"]["digest"] == "sha256:" + ONE_NEW * 5 + "abcd"
    assert check_json(store.root)[0] == 0


def test_invalidate_by_experiment_id_marks_its_latest_attempt(store: Ledger) -> None:
    out = ledger_cli(store.root, "invalidate", "exp-one", "--reason", "eval set leaked")
    assert out.returncode == 0, out.stdout + out.stderr
    rows = _attempts(store.root)
    assert (rows[ONE_NEW]["status"], rows[ONE_NEW]["reason"]) == ("invalid", "eval set leaked")
    assert rows[ONE_OLD]["status"] == "completed"
    listed = ledger_cli(store.root, "list", "--format", "json")
    assert json.loads(listed.stdout)["counts"] == {"completed": 1, "invalid": 1, "failed": 1}


def test_a_mark_outranks_the_end_and_the_latest_mark_wins(store: Ledger) -> None:
    assert ledger_cli(store.root, "invalidate", TWO, "--reason", "bad data").returncode == 0
    row = _attempts(store.root)[TWO]
    assert (row["status"], row["reason"]) == ("invalid", "bad data")
    assert ledger_cli(store.root, "abandon", "exp-two", "--reason", "dropped").returncode == 0
    row = _attempts(store.root)[TWO]
    assert (row["status"], row["reason"]) == ("abandoned", "dropped")


def test_mark_by_record_id_prefix(store: Ledger) -> None:
    record = next(e for e in store.read().entries if e.record["attempt"] == ONE_OLD)
    wanted = record.id.removeprefix("sha256:")[:10]
    out = ledger_cli(store.root, "invalidate", wanted, "--reason", "wrong seed", "--format", "json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["attempt"] == ONE_OLD
    assert _attempts(store.root)[ONE_OLD]["status"] == "invalid"


@pytest.mark.parametrize("action", ["abandon", "invalidate"])
@pytest.mark.parametrize("reason", [None, "", "   ", "\t\n"])
def test_a_mark_without_a_reason_is_refused(store: Ledger, action: str, reason: Any) -> None:
    before = _files(store.root)
    args = [] if reason is None else ["--reason", reason]
    out = ledger_cli(store.root, action, ONE_NEW, *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--reason" in out.stderr
    assert "Traceback" not in out.stderr
    assert _files(store.root) == before


@pytest.mark.parametrize("action", ["abandon", "invalidate"])
def test_an_unknown_attempt_is_refused_naming_the_ledger(store: Ledger, action: str) -> None:
    before = _files(store.root)
    out = ledger_cli(store.root, action, "no-such-experiment", "--reason", "x")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "no attempt 'no-such-experiment' in the ledger" in out.stderr
    assert str(store.root) in out.stderr
    assert _files(store.root) == before


def test_an_ambiguous_prefix_is_refused(store: Ledger) -> None:
    store.append({"status": "started", "attempt": ONE_NEW[:4] + "000000ff"})
    before = _files(store.root)
    out = ledger_cli(store.root, "abandon", ONE_NEW[:4], "--reason", "x")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "names 2 attempts" in out.stderr
    assert _files(store.root) == before


def test_marking_in_a_ledger_that_does_not_exist(folder: Path) -> None:
    out = ledger_cli(folder, "abandon", ONE_NEW, "--reason", "x")
    assert out.returncode == 2, out.stdout + out.stderr
    assert str(folder) in out.stderr
    assert not folder.exists()


def test_a_reason_that_is_not_utf8_is_recorded_escaped(store: Ledger) -> None:
    """A reason typed in a latin-1 terminal reaches Python as a lone surrogate:
    it is recorded with the byte escaped, not a crash (exit 3) of the mark."""
    reason = os.fsdecode(b"caf\xe9 machine rebooted")
    out = ledger_cli(store.root, "abandon", ONE_NEW, "--reason", reason)
    assert out.returncode == 0, out.stdout + out.stderr
    assert _attempts(store.root)[ONE_NEW]["reason"] == "caf\\xe9 machine rebooted"
    assert check_json(store.root)[0] == 0
