"""Attempts of one manifest whose start digests differ are flagged: not the same run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.ledger.attempts import attempts
from ftmanifest.ledger.recordfile import Entry
from ftmanifest.ledger.starts import different_starts, start_of

W1, W2 = "sha256:" + "a" * 64, "sha256:" + "b" * 64
B1 = "sha256:" + "c" * 64


def _run(attempt: str, weights: str | None, batch: str | None, *, manifest: str = "sha256:m",
         start: int = 0) -> list[dict[str, Any]]:  # fmt: skip
    begin = {"attempt": attempt, "status": "started", "manifest": {"digest": manifest},
             "start_global_step": start, "initial_trainable_digest": weights}  # fmt: skip
    return [begin, {**begin, "status": "completed", "first_batch_digest": batch}]


def _entries(*runs: list[dict[str, Any]]) -> list[Entry]:
    records = [r for run in runs for r in run]
    return [Entry("sha256:" + f"{n:064x}", r, Path(str(n))) for n, r in enumerate(records)]


def test_same_manifest_same_start_has_no_note() -> None:
    items = attempts(_entries(_run("a", W1, B1), _run("b", W1, B1)))
    assert start_of(items[0]) == {"initial_trainable_digest": W1, "first_batch_digest": B1}
    assert different_starts(items) == {}


def test_other_initial_weights_are_noted_on_both_attempts() -> None:
    notes = different_starts(attempts(_entries(_run("a", W1, B1), _run("b", W2, B1))))
    assert set(notes) == {"a", "b"}
    (note,) = notes["b"]
    assert "initial trainable weights" in note and "attempt(s) a" in note
    assert "not the same run" in note and "first batch" not in note


def test_another_first_batch_is_noted() -> None:
    notes = different_starts(attempts(_entries(_run("a", W1, B1), _run("b", W1, W2))))
    assert ["first batch" in n for n in notes["a"]] == [True]


def test_other_manifests_resumed_runs_and_unrecorded_starts_are_not_compared() -> None:
    items = attempts(_entries(
        _run("a", W1, B1), _run("b", W2, B1, manifest="sha256:other"),
        _run("c", W2, B1, start=40), _run("d", None, None),
    ))  # fmt: skip
    assert different_starts(items) == {}
