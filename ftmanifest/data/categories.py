"""Categories per split, judged: missing from a split, or too few to measure.

Layer: judging rooms - data core (pure: counts in, ``Finding`` records out).

Severities (also in ``data check --help``):

- a category of train with no example in an eval, baseline-eval or test split
  is an **error** when a per-category guard (``experiment.guards``, kind
  ``per_category``) is measured there (its ``split``, or any such split when
  the guard names none) — the guard cannot be measured for it — else a
  **warning**; a category a guard names explicitly but the split lacks is an
  error too;
- a category of an eval or test split that train lacks: **warning** (the
  model never saw it);
- fewer than the minimum examples of a category in an eval or test split:
  **warning**;
- records without a label in a split where others carry one: **warning**.

The minimum per category is ``data_checks.min_per_category``; when null and
a per-category guard applies, the n at which a 95 % interval on the
*difference* of two proportions (baseline and variant, each measured on the
same n examples, at the worst case p = 0.5) has half-width ``max_drop``:
``n = 1.96² · 2 · 0.25 / max_drop²`` ≈ ``1.92 / max_drop²`` (49 for
max_drop 0.2, 769 for 0.05; the strictest guard wins; capped at
``MAX_MINIMUM``); else ``DEFAULT_MINIMUM``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ftmanifest.findings import Finding
from ftmanifest.manifest.model import Manifest

if TYPE_CHECKING:
    from ftmanifest.findings import Severity

DEFAULT_MINIMUM = 20
MAX_MINIMUM = 100_000
Z95 = 1.96
SHOWN = 10  # categories named in one finding
EVAL_KINDS = ("eval", "test")
OTHER = "(other categories)"  # where a split's counts go past its cap of distinct categories


@dataclass(frozen=True)
class Categories:
    """One split's category counts (text records or image class folders)."""

    split: str
    role: str
    path: str
    counts: Mapping[str, int]
    unlabelled: int = 0

    @property
    def kind(self) -> str:
        return "eval" if self.role == "baseline-eval" else self.role


def _guards(manifest: Manifest, split: str) -> list[Any]:
    return [
        g
        for g in manifest.experiment.guards
        if getattr(g, "kind", None) == "per_category" and g.split in (None, split)
    ]


def minimum(manifest: Manifest, split: str) -> tuple[int, str]:
    """(fewest examples per category in ``split``, the rule that gave it)."""
    fixed = manifest.data_checks.min_per_category
    if fixed is not None:
        return fixed, "data_checks.min_per_category"
    drops = [g.max_drop for g in _guards(manifest, split)]
    if not drops:
        return DEFAULT_MINIMUM, "the default without a per_category guard"
    d = min(drops)
    n = MAX_MINIMUM if d <= 0 else min(MAX_MINIMUM, math.ceil(Z95**2 * 0.5 / d**2))
    return n, f"per_category guard max_drop {d:g}: 1.92/max_drop^2"


def _n(count: int, one: str = "has", many: str = "have") -> str:
    return f"1 category {one}" if count == 1 else f"{count} categories {many}"


def _names(cats: Sequence[str]) -> str:
    shown = ", ".join(repr(c) for c in cats[:SHOWN])
    return shown + (f" and {len(cats) - SHOWN} more" if len(cats) > SHOWN else "")


def _finding(c: Categories, rule: str, severity: Severity, message: str, *more: str) -> Finding:
    expected, observed, hint = more
    return Finding(
        kind="data",
        rule=rule,
        severity=severity,
        path=c.path,
        message=message,
        expected=expected,
        observed=observed,
        hint=hint,
        extra={"split": c.split},
    )


def category_findings(splits: Sequence[Categories], manifest: Manifest) -> list[Finding]:
    """Every finding about categories across ``splits`` (none when nothing is labelled)."""
    if not any(c.counts for c in splits):
        return []
    out: list[Finding] = []
    train = {k for c in splits if c.kind == "train" for k, n in c.counts.items() if n}
    train.discard(OTHER)
    for c in splits:
        if c.counts.get(OTHER):
            out.append(
                _finding(
                    c,
                    "data.too-many-categories",
                    "warning",
                    f"{c.split}: more distinct categories than are counted one by one; "
                    f"{c.counts[OTHER]} records counted together as {OTHER}",
                    f"at most {len(c.counts) - 1} categories",
                    "more",
                    "check data_checks.label: it may name a free-text field, not a category",
                )
            )
        if c.unlabelled and c.counts:
            out.append(
                _finding(
                    c,
                    "data.unlabelled",
                    "warning",
                    f"{c.split}: {c.unlabelled} records carry no label",
                    "a label on every record",
                    f"{c.unlabelled} without",
                    "label them, or set data_checks.label to the key that holds the category",
                )
            )
        if c.kind not in EVAL_KINDS:
            continue
        have = {k for k, n in c.counts.items() if n and k != OTHER}
        guards = _guards(manifest, c.split)
        named = {k for g in guards if isinstance(g.categories, list) for k in g.categories}
        missing = sorted((train | named) - have)
        if missing and (train or named):  # a named category needs no labelled train split
            severity: Severity = "error" if guards else "warning"
            why = (
                "the per_category guard cannot be measured for them"
                if guards
                else "no per_category guard, so this is a warning"
            )
            out.append(
                _finding(
                    c,
                    "data.category-missing",
                    severity,
                    f"{c.split}: {_n(len(missing))} no example here ({why}): {_names(missing)}",
                    "every training category",
                    f"missing: {_names(missing)}",
                    "add examples of them to this split (re-split the data), then re-lock",
                )
            )
        extra = sorted(have - train)
        if extra and train:
            out.append(
                _finding(
                    c,
                    "data.category-unseen",
                    "warning",
                    f"{c.split}: {_n(len(extra), 'is', 'are')} absent from train: {_names(extra)}",
                    "categories the model was trained on",
                    f"only here: {_names(extra)}",
                    "add training examples of them, or check the labels for typos",
                )
            )
        need, rule = minimum(manifest, c.split)
        few = sorted(k for k in have if c.counts[k] < need)
        if few:
            shown = _names([f"{k} ({c.counts[k]})" for k in few])
            out.append(
                _finding(
                    c,
                    "data.too-few",
                    "warning",
                    f"{c.split}: {_n(len(few))} fewer than {need} examples ({rule}): {shown}",
                    f">= {need} per category",
                    shown,
                    "add examples, or set data_checks.min_per_category with a reason",
                )
            )
    return out
