"""What ``score`` says when a prediction's id names no record of the split:
how the split names its records (its ``id`` key, else its 1-based number)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftmanifest.errors import RefusedError
from ftmanifest.results.predictions import Prediction
from ftmanifest.results.split_match import match_records
from tests.conftest import git, run_cli
from tests.results.conftest import write_predictions

UNKEYED = [{"text": "a", "label": "x"}, {"text": "b", "label": "y"}, {"text": "c", "label": "x"}]
KEYED = [{"id": "doc-1", "text": "a", "label": "x"}, {"id": "doc-2", "text": "b", "label": "y"}]


def _refusal(records: list[dict[str, str]], ids: list[str | int], tmp_path: Path) -> RefusedError:
    by_id = {r.get("id", n): r["label"] for n, r in enumerate(records, 1)}
    items = [Prediction(i, by_id.get(i, "x"), "x", None, n) for n, i in enumerate(ids, 1)]
    with pytest.raises(RefusedError) as caught:
        match_records(records, items, "classification", tmp_path / "p.jsonl", "eval")
    return caught.value


def _said(err: RefusedError) -> str:
    return " ".join(str(p) for p in (err.message, err.expected, err.observed, err.hint))


def test_zero_based_ids_on_a_split_without_an_id_key_say_numbers_start_at_1(
    tmp_path: Path,
) -> None:
    err = _refusal(UNKEYED, [0, 1, 2], tmp_path)
    assert err.field == "id" and err.line == 1
    said = _said(err)
    assert "start at 1" in said and "no 'id' key" in said
    assert "1 to 3" in str(err.expected)


def test_ids_numbered_from_1_on_a_split_without_an_id_key_pass(tmp_path: Path) -> None:
    items = [Prediction(n, r["label"], "x", None, n) for n, r in enumerate(UNKEYED, 1)]
    match_records(UNKEYED, items, "classification", tmp_path / "p.jsonl", "eval")


def test_a_record_number_on_a_split_with_an_id_key_names_the_key(tmp_path: Path) -> None:
    err = _refusal(KEYED, [1, "doc-2"], tmp_path)
    said = _said(err)
    assert "'id' key" in said and "'doc-1'" in str(err.expected)
    assert "no 'id' key" not in said


def test_a_split_whose_records_mix_the_key_and_numbers_says_both(tmp_path: Path) -> None:
    err = _refusal([KEYED[0], UNKEYED[1]], ["doc-1", 0], tmp_path)
    said = _said(err)
    assert "'id' key" in said and "start at 1" in said and err.line == 2


def test_an_id_of_the_right_value_but_the_wrong_type_says_so(tmp_path: Path) -> None:
    err = _refusal(UNKEYED, ["1", 2, 3], tmp_path)
    assert "1, not '1'" in err.message


def _unkeyed_project(project: Path) -> None:
    from ftmanifest.verify.lock import lock_manifest

    split = project.parent / "data" / "eval.jsonl"
    split.write_text("".join(json.dumps(r) + "\n" for r in UNKEYED))
    git(project.parent, "commit", "-qam", "an eval split without ids")
    lock_manifest(project)


def test_score_tells_a_zero_based_user_where_record_numbers_start(project: Path) -> None:
    _unkeyed_project(project)
    preds = write_predictions(project.parent / "p.jsonl",
                              [(n, r["label"], "x") for n, r in enumerate(UNKEYED)])  # fmt: skip
    args = ["score", "--manifest", str(project), "--split", "eval", "--predictions", str(preds)]
    done = run_cli(*args)
    assert done.returncode == 1, done.stderr
    assert "id 0 is not a record of split 'eval'" in done.stderr
    assert "start at 1" in done.stderr and "no 'id' key" in done.stderr
    assert "Traceback" not in done.stderr
    write_predictions(preds, [(n, r["label"], "x") for n, r in enumerate(UNKEYED, 1)])
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
