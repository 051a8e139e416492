"""Comparing runs: every guard, per-category drops under a better average, refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.manifest import load_manifest
from ftmanifest.results.compare import compare
from tests.results.conftest import guarded_manifest, results_doc

PER_CAT = "    - {kind: per_category, metric: f1, max_drop: 0.02}\n"
MACRO = "    - {kind: metric, metric: macro_f1, minimum: 0.5}\n"


def _rows(correct: dict[str, int], n: int = 10) -> list[tuple[Any, ...]]:
    """``n`` examples per category, the first ``correct[c]`` right, the rest 'other'."""
    rows: list[tuple[Any, ...]] = []
    for cat, ok in correct.items():
        rows += [(f"{cat}-{i}", cat, cat if i < ok else "other") for i in range(n)]
    return rows


def _manifest(tmp_path: Path, guards: str, task: str = "classification") -> Any:
    return load_manifest(guarded_manifest(tmp_path, guards, task)).manifest


def test_a_category_drop_refuses_even_when_macro_f1_improves(tmp_path: Path) -> None:
    base = results_doc(_rows({"billing": 10, "returns": 5, "account": 5}))
    cand = results_doc(_rows({"billing": 7, "returns": 10, "account": 10}))
    assert cand["metrics"]["macro_f1"] > base["metrics"]["macro_f1"]
    result = compare(_manifest(tmp_path, PER_CAT + MACRO), base, cand, resamples=200)
    assert not result.passed
    drops = [f for f in result.findings if f.rule == "guard.per-category-drop"]
    assert len(drops) == 1
    # billing: F1 1.0 -> P 7/7, R 7/10, F1 = 2 * 0.7 / 1.7 = 14/17
    assert drops[0].extra["category"] == "billing"
    assert drops[0].extra["baseline"] == 1.0
    assert abs(drops[0].extra["candidate"] - 14 / 17) < 1e-9
    assert abs(drops[0].extra["drop"] - 3 / 17) < 1e-9
    assert "billing" in drops[0].message and drops[0].field == "experiment.guards[0].max_drop"
    assert [g.verdict for g in result.guards] == ["fail", "pass"]
    regressed = ["billing-7", "billing-8", "billing-9"]
    assert result.changed["billing"] == {"improved": [], "regressed": regressed}
    assert result.changed["returns"]["improved"] == [f"returns-{i}" for i in range(5, 10)]


def test_a_metric_floor_refuses(tmp_path: Path) -> None:
    rows = _rows({"a": 2, "b": 2})
    result = compare(_manifest(tmp_path, MACRO), results_doc(rows), results_doc(rows))
    assert [f.rule for f in result.findings] == ["guard.minimum"]


def test_a_pass_whose_interval_crosses_the_tolerance_is_not_established(tmp_path: Path) -> None:
    base_rows = _rows({"a": 8, "b": 8})
    base = results_doc(base_rows)
    # same counts, other examples wrong (0 and 1 instead of 8 and 9): delta 0, but
    # ten examples per category cannot tell that from a real drop
    cand = results_doc([(i, r, "other" if i[-1] in "01" else r) for i, r, _ in base_rows])
    result = compare(_manifest(tmp_path, PER_CAT), base, cand, resamples=300, seed=1)
    assert result.passed
    rules = {f.rule for f in result.findings}
    assert rules == {"guard.not-established"}
    row = result.categories[0]
    assert row.interval is not None and row.interval[0] < -0.02
    again = compare(_manifest(tmp_path, PER_CAT), base, cand, resamples=300, seed=1)
    assert again.to_dict() == result.to_dict()  # seeded


def test_identical_large_runs_are_established(tmp_path: Path) -> None:
    rows = _rows({"a": 80, "b": 90}, n=100)
    result = compare(_manifest(tmp_path, PER_CAT), results_doc(rows), results_doc(rows))
    assert result.passed and not result.findings
    assert result.changed == {}


def test_a_lower_format_validity_rate_refuses(tmp_path: Path) -> None:
    guards = "    - {kind: format_validity, format: json, min_rate: 0.9}\n"
    guards += "    - {kind: required_fields, fields: [n], min_rate: 0.5}\n"
    good = [(i, {"n": "1"}, '{"n": "1"}') for i in range(10)]
    worse = [(i, {"n": "1"}, '{"n": "1"}' if i < 8 else "oops") for i in range(10)]
    base = results_doc(good, "extraction", fields=("n",))
    cand = results_doc(worse, "extraction", fields=("n",))
    result = compare(_manifest(tmp_path, guards, "extraction"), base, cand, resamples=0)
    assert [f.rule for f in result.findings] == ["guard.format-validity"]
    assert result.findings[0].observed == "0.8000"
    assert [g.verdict for g in result.guards] == ["fail", "pass"]
    assert result.changed["-"]["regressed"] == [8, 9]


def test_a_low_required_field_rate_refuses(tmp_path: Path) -> None:
    guards = "    - {kind: required_fields, fields: [n, t], min_rate: 0.9}\n"
    rows = [(i, {"n": "1"}, '{"n": "1"}') for i in range(4)]
    doc = results_doc(rows, "extraction", fields=("n", "t"))
    result = compare(_manifest(tmp_path, guards, "extraction"), doc, doc)
    assert [f.rule for f in result.findings] == ["guard.required-fields"]


def test_a_baseline_on_another_split_digest_is_refused(tmp_path: Path) -> None:
    rows = _rows({"a": 9})
    base = results_doc(rows, split="sha256:" + "9" * 64)
    result = compare(_manifest(tmp_path, PER_CAT), base, results_doc(rows))
    assert not result.comparable and not result.passed
    assert [f.rule for f in result.findings] == ["guard.not-comparable"]
    assert "split" in result.findings[0].message and result.guards == []


def test_another_procedure_or_task_is_refused(tmp_path: Path) -> None:
    rows = _rows({"a": 9})
    other = results_doc(rows, procedure="eval-v2")
    result = compare(_manifest(tmp_path, PER_CAT), other, results_doc(rows))
    assert result.findings[0].field == "evaluation.procedure"
    ext = results_doc([(1, {"n": "1"}, "{}")], "extraction")
    result = compare(_manifest(tmp_path, PER_CAT), ext, ext)
    assert {f.field for f in result.findings} == {"experiment.task"}


def test_guards_on_another_split_or_an_unknown_metric(tmp_path: Path) -> None:
    guards = "    - {kind: metric, metric: accuracy, split: test, minimum: 0.9}\n"
    guards += "    - {kind: metric, metric: bleu, minimum: 0.1}\n"
    rows = _rows({"a": 9})
    result = compare(_manifest(tmp_path, guards), results_doc(rows), results_doc(rows))
    assert [(f.rule, f.severity) for f in result.findings] == [
        ("guard.not-evaluated", "warning"),
        ("guard.unknown-metric", "error"),
    ]


def test_to_dict_shape(tmp_path: Path) -> None:
    rows = _rows({"a": 9})
    out = compare(_manifest(tmp_path, PER_CAT), results_doc(rows), results_doc(rows)).to_dict()
    assert set(out) == {"comparable", "passed", "guards", "categories", "changed", "findings"}
    assert set(out["categories"][0]) == {
        "guard",
        "metric",
        "category",
        "baseline",
        "candidate",
        "delta",
        "interval",
        "verdict",
    }
