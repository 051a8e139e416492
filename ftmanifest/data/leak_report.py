"""What the leakage check found between splits, and the verdict on it.

Layer: judging rooms - data core (pure; no I/O).  What flows through here is the
report: the splits to compare (``Split``), the pairs they form in reading order
(``pairs_of``: test, eval, train, each split with itself), the matches found between
two records (``Match``, ``Ref``), each pair's counts (``PairResult``) and the whole
``LeakageReport``.  ``judge`` applies the manifest's ``data_checks.tolerance``
(``LeakTolerance``) to it: the tighter of a pair's own entry and ``sealed`` applies,
and a pair whose near search stopped at ``MAX_PAIRS`` is refused when its near
duplicates are bounded.  Finding the matches (reading the splits, the index, the
verification passes) is ``leakage``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ftmanifest.manifest.data import LeakTolerance, PairTolerance

ROLE_ORDER = {"test": 0, "eval": 1, "baseline-eval": 1, "train": 2}
Kind = Literal["exact", "near", "contained", "input"]
"""How a match was found: the same normalised text, near it (Jaccard), an item inside
the other record's text, or the same input under another answer (``data.contain``).
The last two count as near duplicates."""


@dataclass(frozen=True)
class Split:
    """One data entry to check: its manifest name and role, where it is, how it reads."""

    name: str
    role: str
    path: Path
    format: str | None = None
    sealed: bool = False
    fields: tuple[str, ...] = ()
    shards: tuple[str, ...] = ()  # a folder of shards: its files ('/'-separated, in order)

    @property
    def kind(self) -> str:
        return "eval" if self.role == "baseline-eval" else self.role


@dataclass(frozen=True)
class Ref:
    """One record of one split: its number, the line it starts on and, in a folder
    of shards, the shard that line is in."""

    split: str
    record: int
    line: int
    shard: str = ""


@dataclass(frozen=True)
class Match:
    """Two records found to be duplicates; ``similarity`` is 1.0 for an exact one, and
    for one record's item contained in the other or their same input."""

    kind: Kind
    a: Ref
    b: Ref
    similarity: float


@dataclass(frozen=True)
class Breach:
    """A count over what the manifest allows: ``field`` is where the allowance is set."""

    field: str  # e.g. data_checks.tolerance.train_test.exact
    kind: Literal["exact", "near"]
    count: int
    allowed: int
    floor: bool = False  # the near search stopped (MAX_PAIRS): count is a lower bound


@dataclass
class PairResult:
    """What one split pair (``a`` == ``b``: within one split) holds."""

    a: str
    b: str
    exact: int = 0
    near: int = 0
    refused: bool = False  # set by ``judge``
    examples: list[Match] = field(default_factory=list)
    complete: bool = True  # False: the near search stopped at MAX_PAIRS (near is a floor)
    tolerance: str = ""  # set by ``judge``: the data_checks.tolerance entry that applies
    allowed: dict[str, int | None] = field(default_factory=dict)  # kind -> allowed (None: any)
    breaches: list[Breach] = field(default_factory=list)


@dataclass
class LeakageReport:
    threshold: float
    records: dict[str, int]
    pairs: list[PairResult]
    leaking: dict[str, set[int]]  # train split -> its records duplicated in eval or test
    excerpts: dict[tuple[str, int], str]  # (split, record) -> original text, cut short
    threshold_source: str = "threshold"  # where the threshold came from, for the report
    without_text: dict[str, int] = field(default_factory=dict)  # split -> records with no text
    recall: float = 1.0  # P(a pair at the threshold is an LSH candidate): recall_at(threshold)
    max_pairs: int = 0  # the bound on candidate pairs per split pair (MAX_PAIRS) it ran with

    @property
    def ok(self) -> bool:
        return not any(p.refused for p in self.pairs)


def pairs_of(splits: Sequence[Split]) -> list[tuple[Split, Split]]:
    """(earlier, later) in reading order: test, eval, train; each split with itself."""
    order = sorted(splits, key=lambda s: ROLE_ORDER[s.role])
    out = []
    for j, later in enumerate(order):
        for earlier in order[:j]:
            if earlier.kind != later.kind:
                out.append((earlier, later))
        out.append((later, later))
    return out


def tolerance_key(a: Split, b: Split) -> str:
    """The ``data_checks.tolerance`` entry for a pair: train_eval, train_test, eval_test,
    within_train, or within_eval (inside an eval or a test split)."""
    if a is b:
        return "within_train" if a.kind == "train" else "within_eval"
    kinds = {a.kind, b.kind}
    return "eval_test" if kinds == {"eval", "test"} else "train_" + (kinds - {"train"}).pop()


def judge(
    report: LeakageReport, splits: Sequence[Split], tolerance: LeakTolerance | None = None
) -> LeakageReport:
    """Refuse the pairs that hold more duplicates than ``tolerance`` allows (default: the
    manifest's defaults, no exact duplicate between train and test, no duplicate of any
    kind of a sealed split in another split).  A pair with a sealed split is bound by its
    own entry and by ``sealed``; the tighter allowance applies.  A pair whose near search
    stopped at ``MAX_PAIRS`` cannot be shown to be within a bound: refused when its near
    duplicates are bounded, a warning (a floor) when they are not."""
    tolerance = tolerance or LeakTolerance()
    by_name = {s.name: s for s in splits}
    for p in report.pairs:
        a, b = by_name[p.a], by_name[p.b]
        key = tolerance_key(a, b)
        rules: list[tuple[str, PairTolerance]] = [(key, getattr(tolerance, key))]
        if a is not b and (a.sealed or b.sealed):
            rules.append(("sealed", tolerance.sealed))
        p.tolerance = key
        p.breaches = []
        p.allowed = {}
        for kind in ("exact", "near"):
            count = p.exact if kind == "exact" else p.near
            bounds = [(name, getattr(rule, kind)) for name, rule in rules]
            bounds = [(name, n) for name, n in bounds if n is not None]
            if not bounds:
                p.allowed[kind] = None
                continue
            name, allowed = min(bounds, key=lambda item: item[1])
            p.allowed[kind] = allowed
            floor = kind == "near" and not p.complete  # cannot show it is within: refuse
            if count > allowed or floor:
                where = f"data_checks.tolerance.{name}.{kind}"
                p.breaches.append(Breach(where, kind, count, allowed, floor))
        p.refused = bool(p.breaches)
    return report
