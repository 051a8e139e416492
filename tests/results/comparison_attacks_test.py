"""Attacks on the comparison audit hands off.

Each test is one way a candidate that ``compare`` would refuse against the
pinned baseline, or that no guard judged, used to reach ``OK: ready for
handoff``; audit must refuse it with a row naming the file, the field, the
expected and observed values and the fix.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.findings import Finding
from ftmanifest.results.audit import audit
from tests.conftest import ENV, run_cli
from tests.results.conftest import AuditRun, write_predictions

CATS = ["billing", "shipping", "returns", "technical", "account"]


def _rows(wrong: dict[str, str] | None = None) -> list[tuple[Any, ...]]:
    """The eval split's 20 examples; ``wrong`` maps an id to the label predicted for it."""
    wrong = wrong or {}
    return [(f"{c}-{i}", c, wrong.get(f"{c}-{i}", c)) for c in CATS for i in range(4)]


def _score(r: AuditRun, name: str, rows: list[tuple[Any, ...]], split: str = "eval") -> Path:
    from ftmanifest.cli import main

    results = r.run / "results"
    write_predictions(results / f"{name}.jsonl", rows)
    out = results / f"{name}.results.json"
    code = main(["score", "--manifest", str(r.manifest), "--split", split, "--predictions",
                 str(results / f"{name}.jsonl"), "--adapter", str(r.adapter), "--out",
                 str(out)])  # fmt: skip
    assert code == 0
    return out


def _compare(r: AuditRun, baseline: Path, candidate: Path) -> int:
    from ftmanifest.cli import main

    out = r.run / "comparison.json"
    return main(["compare", str(r.manifest), "--resamples", "200", "--baseline", str(baseline),
                 "--candidate", str(candidate), "--out", str(out)])  # fmt: skip


def _errors(r: AuditRun) -> dict[str, list[Finding]]:
    report = audit(r.run, r.manifest, signature=False, only=["comparison"])
    out: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.severity == "error":
            out.setdefault(f.rule, []).append(f)
    return out


def _pinned(r: AuditRun) -> Path:
    return r.run / "results" / "baseline.results.json"


def test_the_fixture_compares_against_the_pinned_baseline(audit_run: AuditRun) -> None:
    assert _errors(audit_run) == {}


# --- item 9: no guards ------------------------------------------------------------


def test_a_manifest_without_guards_is_refused(audit_run: AuditRun) -> None:
    r = audit_run
    text = r.manifest.read_text()
    text, n = re.subn(r"  guards:\n(?:    .*\n)+", "  guards: []\n", text)
    assert n == 1
    r.manifest.write_text(text)
    r.relock("no guards")
    one_class = _score(r, "candidate", _rows({f"{c}-{i}": "billing" for c in CATS
                                              for i in range(4)}))  # fmt: skip
    assert _compare(r, _pinned(r), one_class) == 0  # nothing to judge: compare passes it
    [row] = _errors(r)["audit.no-guards"]
    assert row.loc == ("experiment", "guards") and row.path == str(r.manifest)
    assert row.expected and row.observed == "guards: []" and "per_category" in (row.hint or "")


# --- item 8: another baseline ---------------------------------------------------


def test_a_baseline_other_than_the_pinned_one_is_refused(audit_run: AuditRun) -> None:
    from ftmanifest.hashing.files import hash_file
    from ftmanifest.manifest import load_manifest

    r = audit_run
    weak = _score(r, "weak", _rows({f"{c}-{i}": "billing" for c in CATS for i in range(2)}))
    assert _compare(r, weak, r.run / "results" / "candidate.results.json") == 0
    [row] = _errors(r)["audit.comparison-baseline-not-pinned"]
    pinned = load_manifest(r.manifest).manifest.evaluation.baseline.results
    assert row.loc == ("evaluation", "baseline", "results") and row.path == str(weak)
    assert row.expected == pinned.digest
    assert row.observed == hash_file(weak, use_cache=False).digest
    assert pinned.path in (row.hint or "")


# --- item 8: guards not judged ----------------------------------------------------


def test_a_comparison_on_another_split_than_the_guards_judges_nothing(
    audit_run: AuditRun,
) -> None:
    from ftmanifest.manifest import load_manifest
    from ftmanifest.results.resultsfile import build_results, dumps

    r = audit_run
    loaded = load_manifest(r.manifest)
    files = {}
    for name in ("baseline", "candidate"):
        preds = write_predictions(r.run / "results" / f"test-{name}.jsonl", [(1, "account",
                                  "account")])  # fmt: skip
        files[name] = r.run / "results" / f"test-{name}.results.json"
        files[name].write_text(dumps(build_results(loaded, "test", preds, r.adapter)))
    assert _compare(r, files["baseline"], files["candidate"]) == 0  # warnings only
    rows = _errors(r)["audit.guard-not-judged"]
    assert [f.loc for f in rows] == [("experiment", "guards", 0, "split"),
                                     ("experiment", "guards", 1, "split")]  # fmt: skip
    assert all(f.expected == "eval" and f.observed == "test" for f in rows)
    assert "not evaluated" in rows[0].message and "--split eval" in (rows[0].hint or "")


def test_a_pass_the_data_cannot_establish_blocks_handoff(audit_run: AuditRun) -> None:
    r = audit_run
    # the pinned baseline gets account-0 wrong; this candidate account-1: same counts
    cand = _score(r, "candidate", _rows({"account-1": "billing"}))
    assert _compare(r, _pinned(r), cand) == 0
    body = json.loads((r.run / "comparison.json").read_text())
    assert body["comparison"]["guards"][0]["verdict"] == "not-established"
    [row] = _errors(r)["audit.guard-not-judged"]
    assert row.loc == ("experiment", "guards", 0, "max_drop")
    assert "not established" in row.message and "more examples" in (row.hint or "")


def test_the_cli_shows_a_not_judged_guard_without_a_traceback(audit_run: AuditRun) -> None:
    r = audit_run
    _compare(r, _pinned(r), _score(r, "candidate", _rows({"account-1": "billing"})))
    out = run_cli("audit", str(r.run), "--manifest", str(r.manifest), "--no-signature",
                  env={**ENV, "COLUMNS": "250"})  # fmt: skip
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "audit.guard-not-judged" in out.stdout


@pytest.mark.parametrize("verdict", ["not-evaluated", "not-established"])
def test_every_guard_row_that_is_not_a_verdict_is_an_error(verdict: str) -> None:
    from ftmanifest.results.comparison_file import unjudged
    from ftmanifest.results.guards import Comparison, GuardRow

    comparison = Comparison(True, guards=[GuardRow(0, "metric", "macro_f1", verdict, "x", "y")])
    [row] = unjudged(comparison, Path("comparison.json"))
    assert row.rule == "audit.guard-not-judged" and row.severity == "error"


# --- item 8: metrics edited in a results file -------------------------------------


def test_metrics_edited_in_the_results_file_are_rescored_from_the_predictions(
    audit_run: AuditRun,
) -> None:
    r = audit_run
    good = json.loads((r.run / "results" / "candidate.results.json").read_text())
    bad = _score(r, "bad", _rows({"billing-0": "account", "billing-1": "account"}))
    assert _compare(r, _pinned(r), bad) == 1  # honest: the billing drop refuses
    body = json.loads(bad.read_text())
    body["metrics"], body["examples"] = good["metrics"], good["examples"]
    bad.write_text(json.dumps(body))
    assert _compare(r, _pinned(r), bad) == 0  # the edited metrics are trusted as written
    [row] = _errors(r)["audit.results-rescored-differ"]
    assert row.path == str(bad) and "candidate" in row.message
    assert row.extra["results_field"] == "metrics.accuracy"
    assert row.expected == "0.9" and row.observed == "1.0"
    assert "ftmanifest score" in (row.hint or "")


def test_a_results_file_whose_predictions_are_elsewhere_is_refused(audit_run: AuditRun) -> None:
    r = audit_run
    cand = r.run / "results" / "candidate.jsonl"
    cand.rename(r.run / "candidate-moved.jsonl")
    [row] = _errors(r)["audit.results-predictions-missing"]
    assert row.path == str(cand.with_name("candidate.results.json"))
    assert row.extra["results_field"] == "predictions.path" and "candidate.jsonl" in row.observed
    assert "ftmanifest score" in (row.hint or "") and "--out" in (row.hint or "")


def test_new_results_record_the_predictions_relative_to_the_results_file(
    audit_run: AuditRun,
) -> None:
    from ftmanifest.cli import main

    r = audit_run
    (r.run / "preds").mkdir()
    preds = write_predictions(r.run / "preds" / "c.jsonl", _rows())
    out = r.run / "results" / "c.results.json"
    assert main(["score", "--manifest", str(r.manifest), "--split", "eval", "--predictions",
                 str(preds), "--adapter", str(r.adapter), "--out", str(out)]) == 0  # fmt: skip
    assert json.loads(out.read_text())["predictions"]["path"] == "../preds/c.jsonl"
    assert _compare(r, _pinned(r), out) == 0
    assert _errors(r) == {}


# --- item 8: predictions that do not match the split ------------------------------


def _refused(r: AuditRun, rows: list[tuple[Any, ...]]) -> Any:
    from ftmanifest.errors import RefusedError
    from ftmanifest.manifest import load_manifest
    from ftmanifest.results.resultsfile import build_results

    preds = write_predictions(r.run / "results" / "forged.jsonl", rows)
    with pytest.raises(RefusedError) as info:
        build_results(load_manifest(r.manifest), "eval", preds, r.adapter)
    assert info.value.path == str(preds) and info.value.hint
    return info.value


def test_a_reference_rewritten_to_the_prediction_is_refused(audit_run: AuditRun) -> None:
    rows = _rows({"billing-0": "account"})
    rows[0] = ("billing-0", "account", "account")  # the reference follows the wrong answer
    err = _refused(audit_run, rows)
    assert err.field == "reference" and err.line == 1
    assert err.expected == "billing" and err.observed == "account"


def test_wrong_examples_dropped_are_refused(audit_run: AuditRun) -> None:
    rows = [row for row in _rows() if row[0] not in ("billing-0", "billing-1")]
    err = _refused(audit_run, rows)
    assert err.field == "id" and "2 of 20" in str(err.observed)
    assert "billing-0" in str(err.observed) and "billing-1" in str(err.observed)


def test_an_id_the_split_does_not_have_is_refused(audit_run: AuditRun) -> None:
    err = _refused(audit_run, [*_rows(), ("billing-99", "billing", "billing")])
    assert err.field == "id" and err.line == 21 and err.observed == "'billing-99'"


def test_records_without_an_id_are_named_by_their_number(tmp_path: Path) -> None:
    from ftmanifest.errors import RefusedError
    from ftmanifest.results.predictions import Prediction
    from ftmanifest.results.split_match import match_records

    records = [{"text": "a", "label": "x"}, {"text": "b", "label": "y"}]
    good = [Prediction(1, "x", "y", None, 1), Prediction(2, "y", "y", None, 2)]
    match_records(records, good, "classification", tmp_path / "p.jsonl", "eval")
    with pytest.raises(RefusedError):
        match_records(records, [Prediction("1", "x", "y", None, 1), good[1]], "classification",
                      tmp_path / "p.jsonl", "eval")  # fmt: skip
