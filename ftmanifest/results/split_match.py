"""Predictions against the split they score: each record once, with its own reference.

Layer: results (edge: reads the pinned split's records with ``recordio``).
``score`` trusted a predictions file's ``id`` and ``reference``, so rewriting
the reference to the wrong answer, or dropping the wrong examples, raised the
metrics (issue 29, item 8).  Now every prediction must name a record of the
split and carry that record's expected output, and every record must be
predicted:

* a split record's id is its ``id`` value (a string or an integer) when it
  has one, else its record number (1-based, ``recordio``'s ``number``);
  ``1`` and ``"1"`` stay different ids, as in the predictions file;
* its expected output is ``data.sample.target_of``: ``data_checks.target``,
  else ``completion``, else the last assistant message, else
  ``data_checks.label`` (``label``, then ``category``).  A classification
  reference must equal it; an extraction reference (an object) must equal
  it parsed as JSON (or, for an object in the record, the object itself).

Any mismatch is a ``RefusedError`` naming the predictions file, the line,
the key, the split's value and the prediction's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ftmanifest.errors import RefusedError
from ftmanifest.results.predictions import Prediction

SHOWN = 10  # missing ids named in one refusal
MAX_TEXT = 200


def _key(ident: Any) -> tuple[str, Any]:
    return type(ident).__name__, ident


def _short(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def split_records(loaded: Any, split: str) -> list[Any]:
    """The parsed records of the data entry ``split``, in file order (a folder: its
    files in path order)."""
    from ftmanifest.manifest.identity import split_entry
    from ftmanifest.recordio import iter_records

    _, entry = split_entry(loaded, split)
    top = loaded.path.parent / entry.path
    files = sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else [top]
    return [rec.value for f in files for rec in iter_records(f, entry.format)]


def match_records(
    records: Sequence[Any],
    items: Sequence[Prediction],
    task: str,
    predictions: Path,
    split: str,
    *,
    target: str | None = None,
    label: str | None = None,
) -> None:
    """Refuse unless ``items`` predict every record of ``records`` once, each with
    the record's expected output as its reference (see the module docstring)."""
    from ftmanifest.data.sample import target_of

    expected: dict[tuple[str, Any], tuple[str, Any]] = {}
    for number, value in enumerate(records, 1):
        ident = value.get("id") if isinstance(value, dict) else None
        if isinstance(ident, bool) or not isinstance(ident, (str, int)) or ident == "":
            ident = number
        where, text = target_of(value, target, label)
        raw = value.get(where) if isinstance(value, dict) and where in value else None
        expected[_key(ident)] = (text, raw)

    def refuse(item: Prediction | None, key: str, message: str, want: str, got: str) -> None:
        raise RefusedError(
            message,
            path=str(predictions),
            line=item.line if item is not None else None,
            field=key,
            expected=want,
            observed=got,
            hint=f"predict every record of the pinned split {split!r} once, with the split's "
            "id (its id key, else its record number) and its label as the reference, then "
            "score again",
        )

    for item in items:
        want = expected.get(_key(item.id))
        if want is None:
            refuse(item, "id", f"id {item.id!r} is not a record of split {split!r}",
                   f"an id of split {split!r}", repr(item.id))  # fmt: skip
            continue
        if not _same(item.reference, want, task):
            refuse(item, "reference", f"the reference of {item.id!r} is not split {split!r}'s",
                   _short(want[0]), _short(_text(item.reference)))  # fmt: skip
    seen = {_key(i.id) for i in items}
    missing = [k[1] for k in expected if k not in seen]
    if missing:
        names = ", ".join(repr(m) for m in missing[:SHOWN])
        more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
        refuse(None, "id", f"{len(missing)} record(s) of split {split!r} have no prediction",
               f"all {len(expected)} records of split {split!r}",
               f"{len(missing)} of {len(expected)} missing: {names}{more}")  # fmt: skip


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _same(reference: Any, want: tuple[str, Any], task: str) -> bool:
    text, raw = want
    if task == "classification" or isinstance(reference, str):
        return reference == text
    if isinstance(raw, dict):
        return bool(reference == raw)
    try:
        return bool(json.loads(text) == reference)
    except ValueError:
        return False


def check_split(loaded: Any, split: str, items: Iterable[Prediction], predictions: Path) -> None:
    """``match_records`` over the pinned split ``split`` of ``loaded``."""
    m = loaded.manifest
    match_records(split_records(loaded, split), list(items), m.experiment.task or "unset",
                  predictions, split, target=m.data_checks.target,
                  label=m.data_checks.label)  # fmt: skip
