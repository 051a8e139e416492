"""Reading a predictions file: one JSON object per line (JSONL).

Layer: judging rooms - edge (reads one file).  The format, per line::

    {"id": "doc-17", "reference": "billing", "prediction": "returns"}
    {"id": 4, "reference": {"total": "12.50"}, "prediction": "{\\"total\\": \\"12.50\\"}",
     "category": "invoice"}

``id``: a string or an integer, unique in the file (``1`` and ``"1"`` are
different ids): the split record's ``id`` value, or for a record without one
its record number, counted from 1 (``ftmanifest.results.split_match``).
``reference``: for classification the expected category label (a string);
for extraction an object of the expected fields.
``prediction``: always a string: the predicted label for classification,
the model's raw output for extraction (it is parsed when scored, so an
unparsable output counts as invalid rather than as unusable input).
``category``: optional, a string; for extraction it groups the examples
(classification uses the reference label).  Other keys are refused, so a
typo such as ``predicton`` cannot pass silently.

Lines are read by ``ftmanifest.recordio.iter_records`` (its limits, its
line numbers, its refusal of duplicate keys and non-regular files); every
problem is an ``InputError`` (exit 2) naming the file, the line and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError
from ftmanifest.recordio import iter_records

KEYS = ("id", "reference", "prediction", "category")
REQUIRED = ("id", "reference", "prediction")
TASKS = ("classification", "extraction")


@dataclass(frozen=True)
class Prediction:
    """One scored example: its id, what was expected and what the model said."""

    id: str | int
    reference: str | dict[str, Any]
    prediction: str
    category: str | None
    line: int


def read_predictions(path: str | Path, task: str) -> list[Prediction]:
    """Every line of ``path``, in file order; raise ``InputError`` on any problem."""
    if task not in TASKS:
        raise InputError(
            f"cannot score a {task!r} task",
            path=str(path),
            field="experiment.task",
            expected=" or ".join(TASKS),
            observed=task,
            hint="set experiment.task in the manifest to classification or extraction",
        )
    out: list[Prediction] = []
    seen: dict[str | int, int] = {}
    for record in iter_records(path, "jsonl"):
        item = _parse(record.value, str(path), record.line, task)
        if item.id in seen:
            raise _bad(
                str(path),
                record.line,
                "id",
                f"duplicate id {item.id!r} (first on line {seen[item.id]})",
                "ids unique in the file",
                repr(item.id),
            )
        seen[item.id] = record.line
        out.append(item)
    if not out:
        raise InputError(
            "the predictions file has no records",
            path=str(path),
            expected="one JSON object per line",
            observed="no records",
            hint="write one line per evaluated example",
        )
    return out


def _parse(value: Any, path: str, line: int, task: str) -> Prediction:
    if not isinstance(value, dict):
        raise _bad(
            path, line, None, "a line is not a JSON object", "an object", type(value).__name__
        )
    for key in value:
        if key not in KEYS:
            raise _bad(path, line, key, f"unknown key {key!r}", ", ".join(KEYS), key)
    for key in REQUIRED:
        if key not in value:
            raise _bad(path, line, key, f"missing key {key!r}", f"a {key!r} key", "absent")
    ident = value["id"]
    if isinstance(ident, bool) or not isinstance(ident, (str, int)) or ident == "":
        raise _bad(path, line, "id", "id is not a string or an integer", "a string or an integer",
                   _kind(ident))  # fmt: skip
    reference = value["reference"]
    want_ref = str if task == "classification" else dict
    if not isinstance(reference, want_ref):
        expected = "a label string" if task == "classification" else "an object of fields"
        raise _bad(path, line, "reference", f"reference is not {expected} ({task})", expected,
                   _kind(reference))  # fmt: skip
    prediction = value["prediction"]
    if not isinstance(prediction, str):
        raise _bad(path, line, "prediction", "prediction is not a string", "a string",
                   _kind(prediction))  # fmt: skip
    category = value.get("category")
    if category is not None and not isinstance(category, str):
        raise _bad(path, line, "category", "category is not a string", "a string", _kind(category))
    return Prediction(ident, reference, prediction, category, line)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _bad(
    path: str, line: int, key: str | None, message: str, expected: str, observed: str
) -> InputError:
    return InputError(
        message,
        path=path,
        line=line,
        field=key,
        expected=expected,
        observed=observed,
        hint="see the predictions format in `ftmanifest score --help` and docs/guides/results.md",
    )
