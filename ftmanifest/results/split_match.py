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

ID_KEY = "id"  # a record's own id; without it, its record number (from 1)
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
    keyed: list[str | int] = []  # the ids taken from the records' id key
    for number, value in enumerate(records, 1):
        ident = _own_id(value)
        if ident is None:
            ident = number
        else:
            keyed.append(ident)
        where, text = target_of(value, target, label)
        raw = value.get(where) if isinstance(value, dict) and where in value else None
        expected[_key(ident)] = (text, raw)
    naming = _naming(keyed, len(expected), split)

    def refuse(item: Prediction | None, key: str, message: str, want: str, got: str) -> None:
        raise RefusedError(
            message,
            path=str(predictions),
            line=item.line if item is not None else None,
            field=key,
            expected=want,
            observed=got,
            hint=f"predict every record of the pinned split {split!r} once: as its id the "
            f"record's {ID_KEY!r} value (without one, its record number, counted from 1), as "
            "its reference its label; then score again",
        )

    for item in items:
        want = expected.get(_key(item.id))
        if want is None:
            refuse(item, "id", f"id {item.id!r} is not a record of split {split!r}: "
                   f"{naming[0]}{_other_type(item.id, expected)}",
                   naming[1], repr(item.id))  # fmt: skip
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


def _own_id(value: Any) -> str | int | None:
    """The record's own id (its ``id`` key's string or integer), or None."""
    ident = value.get(ID_KEY) if isinstance(value, dict) else None
    if isinstance(ident, bool) or not isinstance(ident, (str, int)) or ident == "":
        return None
    return ident


def _naming(keyed: Sequence[str | int], total: int, split: str) -> tuple[str, str]:
    """How split ``split`` names its records: (a sentence, the ids it expects).  A
    user who counts from 0 or numbers a keyed split is told which rule applies."""
    example = ", ".join(repr(k) for k in keyed[:2])
    if not keyed:
        return (f"its records have no {ID_KEY!r} key, so an id is a record's number, and "
                "record numbers start at 1",
                f"a record number of split {split!r}, 1 to {total}")  # fmt: skip
    if len(keyed) == total:
        return (f"its records are named by their {ID_KEY!r} key (e.g. {example})",
                f"the {ID_KEY!r} of a record of split {split!r}, e.g. {example}")  # fmt: skip
    return (f"a record is named by its {ID_KEY!r} key (e.g. {example}), and one without "
            "it by its record number; record numbers start at 1",
            f"the {ID_KEY!r} of a record of split {split!r}, else its record number "
            f"(1 to {total})")  # fmt: skip


def _other_type(ident: str | int, expected: dict[tuple[str, Any], Any]) -> str:
    """``' (the split has 1, not '1')'`` when the id exists with the other type."""
    other: str | int | None = None
    if isinstance(ident, str) and ident.isascii() and ident.isdigit():
        other = int(ident)
    elif isinstance(ident, int):
        other = str(ident)
    if other is not None and _key(other) in expected:
        return f" (ids keep their JSON type: the split has {other!r}, not {ident!r})"
    return ""


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
