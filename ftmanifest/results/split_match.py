"""Predictions against the split they score: each record once, with its own reference.

Layer: judging rooms - results (edge: reads the pinned split's records with
``recordio``).  ``score`` trusted a predictions file's ``id`` and ``reference``, so
rewriting the reference to the wrong answer, or dropping the wrong examples, raised the
metrics.  Now every prediction must name a record of the split and carry that record's
expected output, and every record must be predicted:

* a split record's id is its ``id`` value (a string or an integer) when it
  has one, else its record number (1-based, ``recordio``'s ``number``);
  ``1`` and ``"1"`` stay different ids, as in the predictions file;
* its expected output is ``data.sample.target_of``: ``data_checks.target``,
  else ``completion``, else the last assistant message, else
  ``data_checks.label`` (``label``, then ``category``).  A classification
  reference must equal it; an extraction reference (an object) must equal
  it parsed as JSON (or, for an object in the record, the object itself).

* its category is the record's own (``data.stats.label_of`` with
  ``data_checks.label``: ``label``, else ``category``); for classification
  without one, its expected label.  The category a results file groups by
  is always the record's: a prediction may repeat it, and one that names
  another is refused, so failures relabelled ``misc`` cannot leave a guarded
  category clean.

Any mismatch is a ``PredictionsNotOfSplitError`` (exit 1, reason
``predictions-not-of-split``) naming the predictions file, the line, the
key, the split's value and the prediction's.  Two records of the split with
one id (the same ``id`` value, or a record number equal to another record's
integer ``id``) would let one replace the other unscored: a
``DuplicateSplitIdError`` (exit 2, reason ``duplicate-split-id``) names the
split's file, the ids and their lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.data.sample import target_of
from ftmanifest.data.stats import label_of
from ftmanifest.errors import InputError, RefusedError
from ftmanifest.manifest.identity import split_entry
from ftmanifest.recordio import iter_records
from ftmanifest.results.predictions import Prediction

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest

ID_KEY = "id"  # a record's own id; without it, its record number (from 1)
SHOWN = 10  # missing ids named in one refusal
MAX_TEXT = 200


class PredictionsNotOfSplitError(RefusedError):
    """A prediction names no record of the pinned split, or carries another
    reference or category than its record's, or a record has no prediction."""

    reason = "predictions-not-of-split"


class DuplicateSplitIdError(InputError):
    """Two records of a split have one id, so scoring by id would drop one."""

    reason = "duplicate-split-id"


@dataclass(frozen=True)
class SplitRecord:
    """One record of a split: its parsed value, its file and its line there."""

    value: Any
    path: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class Expected:
    """What the split says of one id: its expected output and its category."""

    text: str
    raw: Any
    category: str | None
    record: SplitRecord


def _key(ident: Any) -> tuple[str, Any]:
    return type(ident).__name__, ident


def _short(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def split_records(loaded: LoadedManifest, split: str) -> list[SplitRecord]:
    """The records of the data entry ``split``, in file order (a folder: its files
    in path order), each with its file and line."""
    _, entry = split_entry(loaded, split)
    top = loaded.path.parent / entry.path
    files = sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else [top]
    return [SplitRecord(rec.value, str(f), rec.line) for f in files
            for rec in iter_records(f, entry.format)]  # fmt: skip


def _record(value: Any) -> SplitRecord:
    return value if isinstance(value, SplitRecord) else SplitRecord(value)


def category_of(value: Any, task: str, where: str, text: str, label: str | None) -> str | None:
    """A record's category (see the module docstring); None when it has none.  For
    extraction a label key that holds the expected output is not a category."""
    key = label or ("label" if isinstance(value, dict) and "label" in value else "category")
    if task == "extraction" and key == where:
        return None
    category = label_of(value, label)
    if category is None and task == "classification":
        return text
    return category


def index_split(
    records: Sequence[Any],
    task: str,
    split: str,
    *,
    target: str | None = None,
    label: str | None = None,
) -> dict[tuple[str, Any], Expected]:
    """Each record by its id (see the module docstring); ``DuplicateSplitIdError``
    when two records share one.  ``records``: ``SplitRecord``s or plain values."""
    expected: dict[tuple[str, Any], Expected] = {}
    repeats: dict[tuple[str, Any], list[SplitRecord]] = {}
    for number, item in enumerate(records, 1):
        rec = _record(item)
        ident = _own_id(rec.value)
        key = _key(number if ident is None else ident)
        if rec.line is None:  # a plain value: its number stands for its line
            rec = replace(rec, line=number)
        where, text = target_of(rec.value, target, label)
        raw = rec.value.get(where) if isinstance(rec.value, dict) and where in rec.value else None
        if key in expected:
            repeats.setdefault(key, [expected[key].record]).append(rec)
            continue
        expected[key] = Expected(text, raw, category_of(rec.value, task, where, text, label), rec)
    if repeats:
        raise _duplicates(repeats, split)
    return expected


def _duplicates(repeats: dict[tuple[str, Any], list[SplitRecord]], split: str) -> InputError:
    files = {r.path for rs in repeats.values() for r in rs}
    first = min((rs[1] for rs in repeats.values()), key=lambda r: (r.path or "", r.line or 0))

    def place(r: SplitRecord) -> str:
        return f"{r.path}:{r.line}" if len(files) > 1 else str(r.line)

    def shown(key: tuple[str, Any], rs: list[SplitRecord]) -> str:
        ident = repr(key[1])
        if any(_own_id(r.value) is None for r in rs):
            ident = f"{ident} (record {key[1]} has no {ID_KEY!r} key: its number)"
        where = ", ".join(place(r) for r in rs[:-1]) + f" and {place(rs[-1])}"
        return f"{ident} (lines {where})"

    names = "; ".join(shown(k, rs) for k, rs in list(repeats.items())[:SHOWN])
    more = f"; and {len(repeats) - SHOWN} more" if len(repeats) > SHOWN else ""
    return DuplicateSplitIdError(
        f"split {split!r} repeats {len(repeats)} id{'s' if len(repeats) > 1 else ''}: scored by "
        "id, a repeated record would replace the other and never be scored",
        path=first.path,
        line=first.line,
        field="id",
        expected=f"each record of split {split!r} with its own {ID_KEY!r}",
        observed=names + more,
        hint=f"give every record of split {split!r} a unique {ID_KEY!r} (or drop the repeats), "
        "then lock the manifest and score again",
    )


def match_records(
    records: Sequence[Any],
    items: Sequence[Prediction],
    task: str,
    predictions: Path,
    split: str,
    *,
    target: str | None = None,
    label: str | None = None,
) -> list[Prediction]:
    """``items`` with each record's category, refused unless they predict every
    record of ``records`` once, each with the record's expected output as its
    reference and no other category (see the module docstring)."""
    expected = index_split(records, task, split, target=target, label=label)
    keyed = [k[1] for k, e in expected.items() if _own_id(e.record.value) is not None]
    naming = _naming(keyed, len(expected), split)

    def refuse(item: Prediction | None, key: str, message: str, want: str, got: str) -> None:
        raise PredictionsNotOfSplitError(
            message,
            path=str(predictions),
            line=item.line if item is not None else None,
            field=key,
            expected=want,
            observed=got,
            hint=f"predict every record of the pinned split {split!r} once: as its id the "
            f"record's {ID_KEY!r} value (without one, its record number, counted from 1), as "
            "its reference its label, and no category or the record's own; a mismatch "
            "usually means the predictions were made on other data; then score again",
        )

    out = []
    for item in items:
        want = expected.get(_key(item.id))
        if want is None:
            refuse(item, "id", f"id {item.id!r} is not a record of split {split!r}: "
                   f"{naming[0]}{_other_type(item.id, expected)}",
                   naming[1], repr(item.id))  # fmt: skip
            continue
        if not _same(item.reference, (want.text, want.raw), task):
            refuse(item, "reference", f"the reference of {item.id!r} is not split {split!r}'s",
                   _short(want.text), _short(_text(item.reference)))  # fmt: skip
        if item.category is not None and item.category != want.category:
            has = (
                repr(want.category)
                if want.category is not None
                else (f"no category (the record has no {label or 'label or category'!r} key)")
            )
            refuse(item, "category", f"the category of {item.id!r} is not split {split!r}'s: "
                   "a results file groups by the split's categories",
                   has, repr(item.category))  # fmt: skip
        out.append(replace(item, category=want.category))
    seen = {_key(i.id) for i in items}
    missing = [k[1] for k in expected if k not in seen]
    if missing:
        names = ", ".join(repr(m) for m in missing[:SHOWN])
        more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
        refuse(None, "id", f"{len(missing)} record(s) of split {split!r} have no prediction",
               f"all {len(expected)} records of split {split!r}",
               f"{len(missing)} of {len(expected)} missing: {names}{more}")  # fmt: skip
    return out


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
        return bool(reference == text)
    if isinstance(raw, dict):
        return bool(reference == raw)
    try:
        return bool(json.loads(text) == reference)
    except ValueError:
        return False


def check_split(
    loaded: LoadedManifest, split: str, items: Iterable[Prediction], predictions: Path
) -> list[Prediction]:
    """``match_records`` over the pinned split ``split`` of ``loaded``."""
    m = loaded.manifest
    return match_records(split_records(loaded, split), list(items),
                         m.experiment.task or "unset", predictions, split,
                         target=m.data_checks.target, label=m.data_checks.label)  # fmt: skip
