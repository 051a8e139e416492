"""Results bound to the pinned split, not to the predictions file.

Three ways a predictions file (or a manifest typo) steered ``score``,
``compare`` and ``audit``: an extraction prediction's ``category`` was taken
from the predictions, so failures relabelled ``misc`` left every guarded
category clean; repeated ids in the split replaced each other, so half the
records were never scored; a per-category guard naming a category the split
does not have judged nothing and passed.  Each attack below runs on real files
through the real reader, beside a control that must still pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.cli import main
from ftmanifest.errors import InputError, RefusedError
from ftmanifest.manifest import load_manifest
from ftmanifest.results.compare import compare
from ftmanifest.results.resultsfile import build_results, load_results
from tests.conftest import git, run_cli
from tests.results.conftest import AuditRun, guarded_manifest, results_doc, write_predictions

EXTRACT = """\
ftmanifest: 1
experiment:
  id: invoices
  task: extraction
  guards:
    - {{kind: per_category, metric: format_validity, max_drop: 0.1{categories}}}
model: {{path: model}}
data:
  - {{name: eval, role: eval, path: eval.jsonl, digest: "{digest}", license: test}}
evaluation: {{procedure: invoices-v1}}
"""

CATS = ["invoice"] * 4 + ["receipt"] * 4
FIELDS = [{"number": str(n), "total": str(n + 4)} for n in range(1, 9)]


def _extraction(tmp_path: Path, categories: str = "") -> Path:
    """An eval split of 8 invoices and receipts (``category`` per record), pinned."""
    from ftmanifest.hashing.files import hash_file

    (tmp_path / "eval.jsonl").write_text("".join(
        json.dumps({"id": n, "prompt": f"doc {n}", "completion": json.dumps(f), "category": c})
        + "\n" for n, (f, c) in enumerate(zip(FIELDS, CATS, strict=True), 1)))  # fmt: skip
    manifest = tmp_path / "inv.yaml"
    digest = hash_file(tmp_path / "eval.jsonl").digest
    manifest.write_text(EXTRACT.format(digest=digest, categories=categories))
    return manifest


def _preds(path: Path, broken: set[int], category: dict[int, str] | None = None) -> Path:
    """Predictions of the 8 records: ``broken`` ids unparsable, categories as given
    (``category``: id -> the category the line claims; absent: no category key)."""
    rows: list[tuple[Any, ...]] = []
    for n, f in enumerate(FIELDS, 1):
        out = "no json" if n in broken else json.dumps(f)
        rows.append((n, f, out, category[n]) if category and n in category else (n, f, out))
    return write_predictions(path, rows)


def _score(manifest: Path, preds: Path) -> dict[str, Any]:
    return build_results(load_manifest(manifest), "eval", preds)


# --- a category taken from the predictions ---------------------------------------


def test_failures_relabelled_misc_are_refused_naming_the_id_and_both_values(
    tmp_path: Path,
) -> None:
    manifest = _extraction(tmp_path)
    honest = {n: c for n, c in enumerate(CATS, 1)}
    preds = _preds(tmp_path / "cand.jsonl", {7, 8}, {**honest, 7: "misc", 8: "misc"})
    with pytest.raises(RefusedError) as caught:
        _score(manifest, preds)
    err = caught.value
    assert err.field == "category" and err.line == 7
    assert (err.expected, err.observed) == ("'receipt'", "'misc'")
    assert "7" in err.message and err.path == str(preds)
    assert err.reason == "predictions-not-of-split"
    done = run_cli("score", "--manifest", str(manifest), "--split", "eval",
                   "--predictions", str(preds))  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "'misc'" in done.stderr and "'receipt'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_attack_no_longer_reaches_compare(tmp_path: Path) -> None:
    """The same relabelled predictions, scored by hand as before the fix, would have
    passed the guard; scored now, the categories are the split's and the guard fails."""
    manifest = _extraction(tmp_path)
    base = _score(manifest, _preds(tmp_path / "base.jsonl", set()))
    cand = _score(manifest, _preds(tmp_path / "cand.jsonl", {7, 8}))  # no category key
    assert sorted(cand["metrics"]["per_category"]) == ["invoice", "receipt"]
    assert cand["metrics"]["per_category"]["receipt"]["format_validity"] == 0.5
    assert {e["category"] for e in cand["examples"] if e["id"] in (7, 8)} == {"receipt"}
    result = compare(load_manifest(manifest).manifest, base, cand, resamples=0)
    assert [f.rule for f in result.findings] == ["guard.per-category-drop"]


def test_control_predictions_with_the_splits_categories_pass(tmp_path: Path) -> None:
    manifest = _extraction(tmp_path)
    honest = {n: c for n, c in enumerate(CATS, 1)}
    base = _score(manifest, _preds(tmp_path / "base.jsonl", set(), honest))
    cand = _score(manifest, _preds(tmp_path / "cand.jsonl", set(), honest))
    assert sorted(cand["metrics"]["per_category"]) == ["invoice", "receipt"]
    assert compare(load_manifest(manifest).manifest, base, cand, resamples=0).passed


def test_a_category_on_a_split_without_categories_is_refused(tmp_path: Path) -> None:
    from ftmanifest.hashing.files import hash_file

    manifest = _extraction(tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    (tmp_path / "eval.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "category"}) + "\n" for r in rows)
    )
    manifest.write_text(EXTRACT.format(digest=hash_file(tmp_path / "eval.jsonl").digest,
                                       categories=""))  # fmt: skip
    with pytest.raises(RefusedError) as caught:
        _score(manifest, _preds(tmp_path / "p.jsonl", set(), {3: "misc"}))
    assert caught.value.field == "category" and caught.value.observed == "'misc'"
    assert "no category" in str(caught.value.expected)
    results = _score(manifest, _preds(tmp_path / "p.jsonl", set()))  # control: no category
    assert list(results["metrics"]["per_category"]) == ["-"]


def test_audit_rescoring_refuses_a_results_file_made_from_relabelled_predictions(
    tmp_path: Path,
) -> None:
    """A results file written before the fix (the forged categories in its examples)
    is judged again from its predictions on the split: refused."""
    from ftmanifest.fsutil import atomic_write_text
    from ftmanifest.results.comparison_file import rescore
    from ftmanifest.results.resultsfile import dumps

    manifest = _extraction(tmp_path)
    honest = {n: c for n, c in enumerate(CATS, 1)}
    preds = _preds(tmp_path / "cand.jsonl", {7, 8}, honest)
    results = _score(manifest, preds)
    out = tmp_path / "cand.results.json"
    atomic_write_text(out, dumps(results))
    assert rescore(load_manifest(manifest), "candidate", out, load_results(out)) == []  # control
    forged = _preds(tmp_path / "cand.jsonl", {7, 8}, {**honest, 7: "misc", 8: "misc"})
    from ftmanifest.hashing.files import hash_file

    results["predictions"]["digest"] = hash_file(forged).digest
    for e in results["examples"]:
        if e["id"] in (7, 8):
            e["category"] = "misc"
    atomic_write_text(out, dumps(results))
    rows = rescore(load_manifest(manifest), "candidate", out, load_results(out))
    assert [r.rule for r in rows] == ["audit.results-rescore-refused"]
    assert rows[0].observed == "'misc'" and rows[0].expected == "'receipt'"


# --- repeated ids in the split -----------------------------------------------------


def _dup_split(project: Path, ids: list[Any]) -> None:
    from ftmanifest.verify.lock import lock_manifest

    cats = ["billing", "shipping"]
    (project.parent / "data" / "eval.jsonl").write_text("".join(
        json.dumps({"id": i, "text": f"ticket {n}", "label": cats[n % 2]}) + "\n"
        for n, i in enumerate(ids)))  # fmt: skip
    git(project.parent, "commit", "-qam", "an eval split")
    lock_manifest(project)


def test_repeated_ids_in_the_split_are_an_error_naming_them_and_their_lines(
    project: Path,
) -> None:
    ids = list(range(1, 9)) * 2  # 16 records, 8 ids: 8 records were never scored
    _dup_split(project, ids)
    preds = write_predictions(project.parent / "p.jsonl",
                              [(i, ["billing", "shipping"][(i - 1) % 2], "billing")
                               for i in range(1, 9)])  # fmt: skip
    with pytest.raises(InputError) as caught:
        build_results(load_manifest(project), "eval", preds)
    err = caught.value
    assert err.reason == "duplicate-split-id" and err.field == "id"
    assert err.path == str(project.parent / "data" / "eval.jsonl")
    assert err.line == 9  # the first repeat
    assert "1 (lines 1 and 9)" in str(err.observed) and "8 (lines 8 and 16)" in str(err.observed)
    assert "8 ids" in err.message
    done = run_cli("score", "--manifest", str(project), "--split", "eval",
                   "--predictions", str(preds))  # fmt: skip
    assert done.returncode == 2 and "duplicate-split-id" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_record_number_colliding_with_a_keyed_id_is_a_repeat(tmp_path: Path) -> None:
    from ftmanifest.results.predictions import Prediction
    from ftmanifest.results.split_match import match_records

    records = [{"text": "a", "label": "x"}, {"id": 1, "text": "b", "label": "y"}]
    items = [Prediction(1, "x", "x", None, 1)]
    with pytest.raises(InputError) as caught:
        match_records(records, items, "classification", tmp_path / "p.jsonl", "eval")
    assert str(caught.value.observed) == "1 (record 1 has no 'id' key: its number) (lines 1 and 2)"


def test_control_a_split_with_unique_ids_scores_every_record(project: Path) -> None:
    _dup_split(project, list(range(1, 17)))
    preds = write_predictions(project.parent / "p.jsonl",
                              [(i, ["billing", "shipping"][(i - 1) % 2], "billing")
                               for i in range(1, 17)])  # fmt: skip
    results = build_results(load_manifest(project), "eval", preds)
    assert results["metrics"]["examples"] == 16


# --- a guard naming a category the split does not have -------------------------------


def _rows(cats: list[str]) -> list[tuple[Any, ...]]:
    return [(f"{c}-{i}", c, c) for c in cats for i in range(5)]


def test_compare_refuses_a_guard_naming_a_category_the_split_lacks(tmp_path: Path) -> None:
    guards = (
        "    - {kind: per_category, metric: f1, max_drop: 0.02, categories: [billing, shiping]}"
    )
    guards += "\n"
    manifest = load_manifest(guarded_manifest(tmp_path, guards)).manifest
    doc = results_doc(_rows(["billing", "shipping"]))
    result = compare(manifest, doc, doc, resamples=0)
    assert not result.passed
    (row,) = [f for f in result.findings if f.rule == "guard.unknown-category"]
    assert row.field == "experiment.guards[0].categories" and row.observed == "shiping"
    assert "'billing', 'shipping'" in str(row.expected) and "shiping" in row.message
    assert [g.verdict for g in result.guards] == ["fail"]
    assert [c.category for c in result.categories] == ["billing"]


def test_compare_cli_exits_1_on_an_unknown_guard_category(tmp_path: Path) -> None:
    guards = "    - {kind: per_category, metric: f1, max_drop: 0.02, categories: [biling]}\n"
    manifest = guarded_manifest(tmp_path, guards)
    doc = tmp_path / "r.json"
    doc.write_text(json.dumps(results_doc(_rows(["billing"]))))
    done = run_cli("compare", str(manifest), "--baseline", str(doc), "--candidate", str(doc))
    assert done.returncode == 1 and "guard.unknown-category" in done.stdout


def test_control_guards_on_existing_categories_pass(tmp_path: Path) -> None:
    guards = "    - {kind: per_category, metric: f1, max_drop: 0.02, categories: [billing]}\n"
    manifest = load_manifest(guarded_manifest(tmp_path, guards)).manifest
    doc = results_doc(_rows(["billing", "shipping"]))
    assert compare(manifest, doc, doc, resamples=0).passed


def _relock_without_compare_passing(r: AuditRun) -> None:
    """``AuditRun.relock`` for a manifest whose compare refuses (it writes the record)."""
    from ftmanifest.adapter.bind import bind_adapter
    from ftmanifest.verify.lock import lock_manifest
    from tests.results.conftest import _eval_rows, tighten

    git(r.manifest.parent, "commit", "-qam", "guards changed")
    lock_manifest(r.manifest)
    r.score_baseline()
    bind_adapter(r.adapter, r.manifest, r.key)
    tighten(r.adapter, r.manifest.parent / "data", r.manifest.parent / "model")
    results = r.run / "results"
    (results / "baseline.results.json").write_bytes(r.pinned_baseline.read_bytes())
    write_predictions(results / "candidate.jsonl", _eval_rows(set()))
    assert main(["score", "--manifest", str(r.manifest), "--split", "eval",
                 "--predictions", str(results / "candidate.jsonl"),
                 "--out", str(results / "candidate.results.json"),
                 "--adapter", str(r.adapter)]) == 0  # fmt: skip
    main(["compare", str(r.manifest), "--resamples", "0",
          "--baseline", str(results / "baseline.results.json"),
          "--candidate", str(results / "candidate.results.json"),
          "--out", str(r.run / "comparison.json")])  # fmt: skip
    tighten(r.run)


def test_audit_refuses_a_guard_naming_a_category_the_split_lacks(audit_run: AuditRun) -> None:
    from ftmanifest.results.audit import audit

    r = audit_run
    clean = audit(r.run, r.manifest, signature=False)
    assert [f.rule for f in clean.findings if f.severity == "error"] == []  # control
    r.manifest.write_text(r.manifest.read_text().replace("technical, account]",
                                                         "tech, account]"))  # fmt: skip
    _relock_without_compare_passing(r)
    report = audit(r.run, r.manifest, signature=False)
    errors = [f for f in report.findings if f.severity == "error"]
    rows = [f for f in errors if f.rule == "audit.guard-unknown-category"]
    assert len(rows) == 1, [f.rule for f in errors]
    assert rows[0].observed == "tech" and "'technical'" in str(rows[0].expected)
    assert rows[0].field == "experiment.guards[0].categories"


def test_audit_refuses_a_split_with_repeated_ids_from_the_records(audit_run: AuditRun) -> None:
    """The split's records, not the results files: a repeated id is an audit row."""
    from ftmanifest.results.audit import audit

    r = audit_run
    split = r.manifest.parent / "data" / "eval.jsonl"
    lines = split.read_text().splitlines(keepends=True)
    split.write_text("".join(lines) + lines[0])
    git(r.manifest.parent, "commit", "-qam", "a repeated record")
    from ftmanifest.verify.lock import lock_manifest

    lock_manifest(r.manifest)
    report = audit(r.run, r.manifest, signature=False, only=["split"])
    rows = [f for f in report.findings if f.rule == "audit.split-duplicate-ids"]
    assert len(rows) == 1 and rows[0].path == str(split) and rows[0].line == len(lines) + 1
