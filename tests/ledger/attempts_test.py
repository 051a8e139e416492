"""The pure view of the ledger: records grouped into attempts, each with its
outcome, reason, times and budget; ``find`` naming an attempt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ftmanifest.ledger.attempts import attempts, counts, find
from ftmanifest.ledger.recordfile import Entry


def _entries(*records: dict[str, Any]) -> list[Entry]:
    out = []
    for n, rec in enumerate(records):
        rid = "sha256:" + f"{n:02x}" * 32
        out.append(Entry(rid, {"at": f"2026-01-01T00:00:{n:02d}+00:00", **rec}, Path(f"{n}")))
    return out


def test_a_run_under_the_trainer_guard_starts_when_run_started() -> None:
    """``run`` writes "started", the Trainer guard joins the attempt with its own
    "started" later: the attempt started at the first one."""
    (a,) = attempts(_entries(
        {"attempt": "x", "status": "started", "experiment": {"id": "e"}},
        {"attempt": "x", "status": "started", "budget_used": {"steps": 10}},  # the guard
        {"attempt": "x", "status": "completed", "budget_used": {"hours": 0.5}},
    ))  # fmt: skip
    assert a.started_at == "2026-01-01T00:00:00+00:00"
    assert a.ended_at == "2026-01-01T00:00:02+00:00"
    assert (a.status, a.experiment) == ("completed", "e")
    assert a.used == {"steps": 10, "hours": 0.5, "gpu_hours": None}


@pytest.mark.parametrize(
    ("statuses", "status"),
    [
        (["planned"], "planned"),
        (["planned", "started"], "unfinished"),
        (["started", "failed"], "failed"),
        (["started", "failed", "abandoned"], "abandoned"),
        (["started", "abandoned", "completed"], "abandoned"),  # a mark outranks the end
        (["started", "invalid", "abandoned"], "abandoned"),  # the latest mark wins
        (["refused"], "refused"),
        (["started", "not-started"], "not-started"),
    ],
)
def test_the_outcome(statuses: list[str], status: str) -> None:
    (a,) = attempts(_entries(*({"attempt": "x", "status": s} for s in statuses)))
    assert a.status == status


def test_records_without_an_attempt_are_their_own_and_counted() -> None:
    items = attempts(_entries(
        {"status": "completed"},
        {"attempt": "", "status": "failed", "reason": "exit status 1"},
        {"attempt": "y", "status": "started"},
    ))  # fmt: skip
    assert [a.id for a in items][2] == "y"
    assert all(a.id.startswith("r-") for a in items[:2])
    assert counts(items) == {"completed": 1, "failed": 1, "unfinished": 1}
    assert items[1].reason == "exit status 1"


def test_find_by_id_prefix_record_and_experiment() -> None:
    items = attempts(_entries(
        {"attempt": "aaaa1111", "status": "started", "experiment": {"id": "e1"}},
        {"attempt": "aaaa2222", "status": "started", "experiment": {"id": "e1"}},
        {"attempt": "bbbb3333", "status": "started", "experiment": {"id": "e2"}},
    ))  # fmt: skip
    assert [a.id for a in find(items, "aaaa1111")] == ["aaaa1111"]
    assert [a.id for a in find(items, "aaaa2")] == ["aaaa2222"]
    assert len(find(items, "aaaa")) == 2
    assert find(items, "aaa") == []  # too short to be a prefix
    assert [a.id for a in find(items, "e1")] == ["aaaa2222"]  # its latest attempt
    assert [a.id for a in find(items, "sha256:" + "02" * 5)] == ["bbbb3333"]
    assert find(items, "nothing") == []
