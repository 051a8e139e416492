"""``ftmanifest score`` and ``ftmanifest compare`` on the locked example project."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ftmanifest.cli import main
from ftmanifest.results.resultsfile import results_schema
from tests.conftest import run_cli
from tests.results.conftest import write_predictions

CATS = ["billing", "shipping", "returns", "technical", "account"]


def _rows(right: dict[str, int], n: int = 40) -> list[tuple[Any, ...]]:
    return [(f"{c}-{i}", c, c if i < right.get(c, n) else "other") for c in CATS for i in range(n)]


def _eval_split(project: Path, rows: list[tuple[Any, ...]]) -> None:
    """Make the eval split the records ``rows`` predict (score checks ids and
    references against it), committed and locked."""
    from ftmanifest.verify.lock import lock_manifest
    from tests.conftest import git

    split = project.parent / "data" / "eval.jsonl"
    text = "".join(json.dumps({"id": r[0], "text": f"a {r[1]} ticket", "label": r[1]}) + "\n"
                   for r in rows)  # fmt: skip
    if split.read_text() != text:
        split.write_text(text)
        git(project.parent, "commit", "-qam", "the eval split the predictions score")
        lock_manifest(project)


def _score(project: Path, name: str, rows: list[tuple[Any, ...]]) -> Path:
    _eval_split(project, rows)
    preds = write_predictions(project.parent / f"{name}.jsonl", rows)
    assert (
        main(["score", "--manifest", str(project), "--split", "eval", "--predictions", str(preds)])
        == 0
    )
    return project.parent / f"{name}.results.json"


def test_score_writes_a_valid_results_file_beside_the_predictions(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _score(project, "base", _rows({"billing": 30}))
    text = capsys.readouterr().out
    assert f"wrote {out}" in text and "billing" in text and "macro_f1" in text
    jsonschema.validate(json.loads(out.read_text()), results_schema())
    other = project.parent / "elsewhere.json"
    preds = str(project.parent / "base.jsonl")
    args = ["score", "--manifest", str(project), "--split", "eval", "--predictions", preds]
    assert main([*args, "--out", str(other), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["results"] == str(other) and shown["metrics"]["accuracy"] == 190 / 200


def test_compare_refuses_a_category_drop_under_a_better_average(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _score(project, "base", _rows({"returns": 30, "account": 30}))
    cand = _score(project, "cand", _rows({"billing": 36}))
    capsys.readouterr()
    args = ["compare", str(project), "--baseline", str(base), "--candidate", str(cand)]
    assert main(args) == 1
    text = capsys.readouterr().out
    assert "guard.per-category-drop" in text and "'billing'" in text and "refused" in text
    assert "billing: improved none; regressed billing-36" in text
    assert main([*args, "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is False
    assert [
        f["extra"]["category"] for f in doc["findings"] if f["rule"] == "guard.per-category-drop"
    ] == ["billing"]


def test_compare_passes_a_candidate_that_holds_every_guard(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _score(project, "base", _rows({"returns": 30}))
    cand = _score(project, "cand", _rows({}))
    assert main(["compare", str(project), "--baseline", str(base), "--candidate", str(cand)]) == 0
    assert "passed: every guard holds" in capsys.readouterr().out


def test_console_script_exit_codes(project: Path) -> None:
    bad = project.parent / "bad.jsonl"
    bad.write_text('{"id": 1, "reference": "billing"}\n')
    args = ["score", "--manifest", str(project), "--split", "eval", "--predictions", str(bad)]
    proc = run_cli(*args)
    assert proc.returncode == 2 and "prediction" in proc.stderr and "bad.jsonl" in proc.stderr
    (project.parent / "data" / "eval.jsonl").write_text('{"text": "changed"}\n')
    good = write_predictions(project.parent / "p.jsonl", [(1, "billing", "billing")])
    proc = run_cli(
        "score", "--manifest", str(project), "--split", "eval", "--predictions", str(good)
    )
    assert proc.returncode == 1 and "not the data the manifest pins" in proc.stderr
    proc = run_cli("compare", str(project), "--baseline", str(bad), "--candidate", str(bad))
    assert proc.returncode == 2 and "not an ftmanifest results file" in proc.stderr


EXTRACT = """\
ftmanifest: 1
experiment:
  id: invoices
  task: extraction
  guards:
    - {{kind: format_validity, format: {fmt}, min_rate: 0.9}}
    - {{kind: required_fields, fields: [number, total], min_rate: 0.5}}
model: {{path: model}}
data:
  - {{name: eval, role: eval, path: eval.jsonl, digest: "{digest}", license: test}}
evaluation: {{procedure: invoices-v1}}
"""


def _extraction_project(tmp_path: Path, fmt: str) -> Path:
    from ftmanifest.hashing.files import hash_file

    fields = [{"number": str(n), "total": str(n + 4)} for n in range(1, 5)]
    (tmp_path / "eval.jsonl").write_text("".join(
        json.dumps({"id": n, "prompt": f"invoice {n}", "completion": json.dumps(f)}) + "\n"
        for n, f in enumerate(fields, 1)))  # fmt: skip
    digest = hash_file(tmp_path / "eval.jsonl").digest
    schema = {"type": "object", "properties": {"total": {"type": "string"}}}
    (tmp_path / "invoice.schema.json").write_text(json.dumps(schema))
    manifest = tmp_path / "inv.yaml"
    manifest.write_text(EXTRACT.format(fmt=fmt, digest=digest))
    return manifest


def test_score_extraction_against_the_guards_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _extraction_project(tmp_path, "invoice.schema.json")
    rows = [
        (1, {"number": "1", "total": "5"}, '{"number": "1", "total": "5"}'),
        (2, {"number": "2", "total": "6"}, '{"number": "2", "total": 6}'),  # fails the schema
        (3, {"number": "3", "total": "7"}, "no json here"),
        (4, {"number": "4", "total": "8"}, '{"number": "4"}'),
    ]
    preds = write_predictions(tmp_path / "p.jsonl", rows)
    args = ["score", "--manifest", str(manifest), "--split", "eval", "--predictions", str(preds)]
    assert main(args) == 0
    assert "per field: number 0.7500  total 0.5000" in capsys.readouterr().out
    results = json.loads((tmp_path / "p.results.json").read_text())
    jsonschema.validate(results, results_schema())
    metrics = results["metrics"]
    assert (metrics["format_validity"], metrics["required_fields"]) == (0.5, 0.5)
    assert metrics["format"]["format"] == "invoice.schema.json"
    assert metrics["format"]["schema_digest"].startswith("sha256:")
    args = ["compare", str(manifest), "--baseline", str(tmp_path / "p.results.json")]
    assert main([*args, "--candidate", str(tmp_path / "p.results.json")]) == 1
    assert "guard.format-validity" in capsys.readouterr().out


def test_an_unreadable_guard_schema_is_an_input_error(tmp_path: Path) -> None:
    manifest = _extraction_project(tmp_path, "absent.schema.json")
    preds = write_predictions(tmp_path / "p.jsonl", [(1, {"number": "1"}, "{}")])
    args = ["score", "--manifest", str(manifest), "--split", "eval", "--predictions", str(preds)]
    assert main(args) == 2
