"""Scoring: hand-computed metrics, the results file and its schema, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftmanifest.errors import InputError, RefusedError
from ftmanifest.manifest import load_manifest
from ftmanifest.results.predictions import Prediction
from ftmanifest.results.resultsfile import build_results, load_results, results_schema
from ftmanifest.results.score import score
from tests.results.conftest import guarded_manifest, write_predictions

# (id, reference, prediction)
TABLE = [(1, "a", "a"), (2, "a", "a"), (3, "a", "b"), (4, "b", "b"), (5, "b", "a"), (6, "c", "b")]


def _items(rows: list[tuple[object, ...]]) -> list[Prediction]:
    return [
        Prediction(r[0], r[1], r[2], r[3] if len(r) > 3 else None, n)  # type: ignore[arg-type]
        for n, r in enumerate(rows, 1)
    ]


def test_classification_matches_hand_computed_per_category_f1() -> None:
    metrics, examples = score(_items(TABLE), "classification")
    per = metrics["per_category"]
    # a: TP 2 (ids 1, 2); predicted a 3 times (1, 2, 5); 3 references (1, 2, 3)
    #    P = 2/3, R = 2/3, F1 = 2/3
    assert per["a"] == pytest.approx(
        {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3}
    )
    # b: TP 1 (id 4); predicted b 3 times (3, 4, 6); 2 references (4, 5)
    #    P = 1/3, R = 1/2, F1 = 2 * 1/3 * 1/2 / (1/3 + 1/2) = (1/3) / (5/6) = 2/5
    assert per["b"] == pytest.approx({"precision": 1 / 3, "recall": 1 / 2, "f1": 0.4, "support": 2})
    # c: never predicted: P = 0/0 -> 0 (documented), R = 0/1 = 0, F1 = 0
    assert per["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    # accuracy = 3 correct of 6; macro F1 = (2/3 + 2/5 + 0) / 3 = 16/45; micro F1 = accuracy
    assert metrics["accuracy"] == pytest.approx(0.5)
    assert metrics["macro_f1"] == pytest.approx(16 / 45)
    assert metrics["micro_f1"] == pytest.approx(0.5)
    assert [(e["id"], e["correct"]) for e in examples][:3] == [(1, True), (2, True), (3, False)]


def test_a_predicted_label_outside_the_references_is_a_category() -> None:
    metrics, _ = score(_items([(1, "a", "zzz")]), "classification")
    assert sorted(metrics["per_category"]) == ["a", "zzz"]


def test_extraction_validity_required_fields_and_exact_match() -> None:
    rows = [
        (1, {"n": "1", "t": "5"}, '{"n": "1", "t": "5"}', "inv"),  # valid, complete, 2/2 match
        (2, {"n": "2", "t": "6"}, '{"n": "2", "t": ""}', "inv"),  # valid, t empty, 1/2
        (3, {"n": "3", "t": "7"}, "not json", "receipt"),  # invalid, nothing present, 0/2
        (4, {"n": "4", "t": "8"}, '{"n": "4", "t": "9"}'),  # valid, complete, 1/2
    ]
    metrics, examples = score(_items(rows), "extraction", fields=("n", "t"))
    assert metrics["format_validity"] == pytest.approx(3 / 4)
    assert metrics["required_fields"] == pytest.approx(2 / 4)
    assert metrics["required_fields_per_field"] == pytest.approx({"n": 3 / 4, "t": 2 / 4})
    assert metrics["field_exact_match"] == pytest.approx(4 / 8)
    assert metrics["per_category"]["receipt"] == {
        "examples": 1,
        "format_validity": 0.0,
        "required_fields": 0.0,
    }
    assert examples[2]["missing"] == ["n", "t"]


def test_extraction_checks_the_json_schema_when_given() -> None:
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "string"}}}
    rows = [(1, {"n": "1"}, '{"n": "1"}'), (2, {"n": "2"}, '{"n": 2}')]
    metrics, _ = score(_items(rows), "extraction", schema=schema)
    assert metrics["format_validity"] == 0.5


label = st.sampled_from(["a", "b", "c"])


@given(st.lists(st.tuples(label, label), min_size=1, max_size=30), st.randoms())
def test_scoring_is_invariant_to_the_order_of_prediction_lines(
    pairs: list[tuple[str, str]], rnd: object
) -> None:
    rows = [(n, r, p) for n, (r, p) in enumerate(pairs)]
    shuffled = list(rows)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert score(_items(rows), "classification") == score(_items(shuffled), "classification")


def _table_split(project: Path) -> None:
    """The eval split of ``TABLE``: records 1-6 (no id key: numbered) with its references."""
    from ftmanifest.verify.lock import lock_manifest
    from tests.conftest import git

    records = "".join(json.dumps({"text": f"doc {i}", "label": r}) + "\n" for i, r, _ in TABLE)
    (project.parent / "data" / "eval.jsonl").write_text(records)
    git(project.parent, "commit", "-qam", "the table's eval split")
    lock_manifest(project)


def test_results_file_binds_inputs_and_validates_against_its_schema(project: Path) -> None:
    _table_split(project)
    loaded = load_manifest(project)
    preds = write_predictions(project.parent / "p.jsonl", TABLE)
    results = build_results(loaded, "eval", preds)
    jsonschema.Draft202012Validator.check_schema(results_schema())
    jsonschema.validate(results, results_schema())
    eval_entry = next(e for e in loaded.manifest.data if e.name == "eval")
    assert results["split"] == {
        "name": "eval",
        "path": "data/eval.jsonl",
        "digest": eval_entry.digest,
    }
    assert results["manifest"]["digest"] == loaded.digest()
    assert results["procedure"] == "docroute-eval-v3"
    assert results["model"]["tree_digest"] == loaded.manifest.model.tree_digest
    assert results["predictions"]["digest"].startswith("sha256:")
    out = project.parent / "r.json"
    out.write_text(json.dumps(results))
    assert load_results(out) == results


def test_adapter_files_are_recorded_when_the_export_exists(project: Path) -> None:
    adapter = project.parent / "out" / "docroute-lora-r16"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    _table_split(project)
    preds = write_predictions(project.parent / "p.jsonl", TABLE)
    results = build_results(load_manifest(project), "eval", preds)
    assert list(results["adapter"]["files"]) == ["adapter_config.json"]
    jsonschema.validate(results, results_schema())


def test_changed_split_data_is_refused_naming_both_digests(project: Path) -> None:
    (project.parent / "data" / "eval.jsonl").write_text('{"text": "changed"}\n')
    preds = write_predictions(project.parent / "p.jsonl", TABLE)
    with pytest.raises(RefusedError) as info:
        build_results(load_manifest(project), "eval", preds)
    assert info.value.field == "data[1].digest"
    assert info.value.expected != info.value.observed


def test_unknown_split_and_unpinned_split_are_input_errors(tmp_path: Path) -> None:
    manifest = guarded_manifest(tmp_path, "    - {kind: metric, metric: accuracy, minimum: 0.5}")
    (tmp_path / "eval.jsonl").write_text("{}\n")
    preds = write_predictions(tmp_path / "p.jsonl", TABLE)
    with pytest.raises(InputError, match="no data entry named 'nope'"):
        build_results(load_manifest(manifest), "nope", preds)
    with pytest.raises(InputError, match="no pinned digest") as info:
        build_results(load_manifest(manifest), "eval", preds)
    assert "ftmanifest lock" in (info.value.hint or "")


def test_not_a_results_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"format": "something-else"}')
    with pytest.raises(InputError, match="not an ftmanifest results file"):
        load_results(path)


def _score_cli(project: Path, *extra: str) -> tuple[int, str, Path]:
    from tests.conftest import run_cli

    _table_split(project)
    preds = write_predictions(project.parent / "p.jsonl", TABLE)
    out = project.parent / "p.results.json"
    done = run_cli("score", "--manifest", str(project), "--split", "eval",
                   "--predictions", str(preds), "--out", str(out), *extra)  # fmt: skip
    return done.returncode, done.stderr, out


def test_an_adapter_path_that_does_not_exist_is_unusable_input(project: Path) -> None:
    missing = project.parent / "out" / "docroute-lora-r61"
    code, err, out = _score_cli(project, "--adapter", str(missing))
    assert code == 2, err
    assert "adapter not found" in err and str(missing) in err and "Traceback" not in err
    assert not out.exists()


def test_an_adapter_path_that_is_a_file_is_unusable_input(project: Path) -> None:
    code, err, out = _score_cli(project, "--adapter", str(project))
    assert code == 2, err
    assert "not a folder" in err and not out.exists()


def test_an_adapter_named_with_no_export_in_the_manifest_is_unusable_input(
    tmp_path: Path,
) -> None:
    from tests.conftest import run_cli

    manifest = guarded_manifest(tmp_path, "    - {kind: metric, metric: accuracy, minimum: 0.5}")
    assert "export" not in manifest.read_text()
    (tmp_path / "adapter").mkdir()
    preds = write_predictions(tmp_path / "p.jsonl", TABLE)
    done = run_cli("score", "--manifest", str(manifest), "--split", "eval",
                   "--predictions", str(preds), "--adapter", str(tmp_path / "adapter"))  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "export.path" in done.stderr


def test_an_adapter_path_that_exists_is_recorded(project: Path) -> None:
    adapter = project.parent / "elsewhere" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    code, err, out = _score_cli(project, "--adapter", str(adapter))
    assert code == 0, err
    assert list(json.loads(out.read_text())["adapter"]["files"]) == ["adapter_config.json"]


def test_no_adapter_named_and_none_at_export_path_records_none(project: Path) -> None:
    code, err, out = _score_cli(project)
    assert code == 0, err
    assert json.loads(out.read_text())["adapter"] is None
