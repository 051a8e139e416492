"""FTM003: a value still marked ``# FILL:`` is refused, whatever stands there.

``init`` writes a placeholder beside each mark where the schema needs one; a
manifest that lints clean with the mark left would pass a value nobody chose.
"""

from __future__ import annotations

from pathlib import Path

from ftmanifest.lint import lint_document
from ftmanifest.manifest import load_document
from ftmanifest.manifest.edit import apply_yaml
from ftmanifest.manifest.fills import fill_marks
from tests.conftest import CLF


def _lint(tmp_path: Path, text: str) -> list[tuple[str | None, str | None]]:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return [(f.rule, f.field) for f in lint_document(load_document(path))]


def _marked(old: str, new: str) -> str:
    text = CLF.read_text()
    assert old in text
    return text.replace(old, new, 1)


def test_a_value_left_marked_fill_is_refused(tmp_path: Path) -> None:
    assert _lint(tmp_path, CLF.read_text()) == []  # control: the pinned example is clean
    text = _marked("  grad_accum: 4\n", "  grad_accum: 4  # FILL: micro-batches per step\n")
    found = lint_document(load_document(_write(tmp_path, text)))
    assert [(f.rule, f.field) for f in found] == [("FTM003", "training.grad_accum")]
    assert found[0].line == text.splitlines().index("  grad_accum: 4  # FILL: micro-batches "
                                                    "per step") + 1  # fmt: skip
    assert "micro-batches per step" in found[0].message and found[0].hint


def test_filling_the_value_through_edit_drops_the_mark(tmp_path: Path) -> None:
    text = _marked("  grad_accum: 4\n", "  grad_accum: null  # FILL: micro-batches per step\n")
    assert ("FTM060", "training.grad_accum") in _lint(tmp_path, text)
    filled = apply_yaml(text, [(("training", "grad_accum"), 4)])
    assert fill_marks(filled) == [] and _lint(tmp_path, filled) == []


def test_a_mark_where_another_rule_refuses_is_not_said_twice(tmp_path: Path) -> None:
    text = _marked("  grad_accum: 4\n", "  grad_accum: null  # FILL: micro-batches per step\n")
    assert _lint(tmp_path, text) == [("FTM060", "training.grad_accum")]


def test_fill_inside_a_block_string_is_no_mark(tmp_path: Path) -> None:
    text = _marked(
        "  hypothesis: >-\n",
        "  hypothesis: >-\n    note: a line that reads like a key  # FILL: not a mark\n",
    )
    assert [m.loc for m in fill_marks(text)] == [("experiment", "hypothesis", "note")]
    assert _lint(tmp_path, text) == []  # the document has no such key: no finding


def test_marks_on_list_items_are_located(tmp_path: Path) -> None:
    text = "data:\n  - name: a\n    license: null  # FILL: its licence\n  - name: b\n"
    text += "    role: null  # FILL: its role\n"
    assert [(m.loc, m.decide) for m in fill_marks(text)] == [
        (("data", 0, "license"), "its licence"),
        (("data", 1, "role"), "its role"),
    ]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path
