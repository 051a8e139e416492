"""Reading predictions: the documented JSONL format, refused with file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftmanifest.errors import InputError
from ftmanifest.results.predictions import read_predictions
from tests.results.conftest import write_predictions


def test_reads_classification_and_extraction_lines(tmp_path: Path) -> None:
    clf = write_predictions(tmp_path / "c.jsonl", [(1, "a", "a"), ("x", "b", "a")])
    items = read_predictions(clf, "classification")
    assert [(i.id, i.reference, i.prediction, i.line) for i in items] == [
        (1, "a", "a", 1),
        ("x", "b", "a", 2),
    ]
    ext = write_predictions(tmp_path / "e.jsonl", [(1, {"n": "1"}, '{"n": "1"}', "inv")])
    (item,) = read_predictions(ext, "extraction")
    assert item.reference == {"n": "1"} and item.category == "inv"


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ('{"id": 1, "reference": "a", "prediction": "a"}\n{"id": 1, "reference": "b", '
         '"prediction": "b"}\n', 2, "id"),
        ('{"id": 1, "prediction": "a"}\n', 1, "reference"),
        ('{"id": true, "reference": "a", "prediction": "a"}\n', 1, "id"),
        ('{"id": 1, "reference": "a", "prediction": 3}\n', 1, "prediction"),
        ('{"id": 1, "reference": {"a": 1}, "prediction": "a"}\n', 1, "reference"),
        ('{"id": 1, "reference": "a", "prediction": "a", "predicton": "b"}\n', 1, "predicton"),
        ('{"id": 1, "reference": "a", "prediction": "a", "category": 2}\n', 1, "category"),
        ('[1, 2]\n', 1, None),
    ],
)  # fmt: skip
def test_bad_lines_name_file_line_and_key(
    tmp_path: Path, text: str, line: int, field: str | None
) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_predictions(path, "classification")
    assert (info.value.path, info.value.line, info.value.field) == (str(path), line, field)
    assert info.value.exit_code == 2


def test_malformed_json_and_empty_file_are_input_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1,}\n')
    with pytest.raises(InputError) as info:
        read_predictions(bad, "classification")
    assert info.value.line == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match="no records"):
        read_predictions(empty, "classification")


def test_a_task_that_cannot_be_scored_is_refused(tmp_path: Path) -> None:
    path = write_predictions(tmp_path / "p.jsonl", [(1, "a", "a")])
    with pytest.raises(InputError) as info:
        read_predictions(path, "generation")
    assert info.value.field == "experiment.task"
