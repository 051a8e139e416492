"""Paired bootstrap of per-category metric differences between two runs.

Layer: judging rooms - results (pure core).  Both runs' verdicts on the same example ids
are resampled together (the same ids, with replacement, in each round), the per-category
metric is computed for baseline and candidate on that resample, and the percentile
interval of candidate - baseline is reported.  Seeded ``random.Random`` rather than
numpy, so the interval is the same whether or not numpy is installed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ftmanifest.results.score import ratio

Rows = Sequence[Mapping[str, Any]]
Stat = Callable[[Rows], dict[str, float]]


def classification_stat(metric: str) -> Stat:
    """Per-category precision, recall or F1 of classification verdicts (one pass)."""

    def stat(rows: Rows) -> dict[str, float]:
        tp: Counter[str] = Counter()
        ref: Counter[str] = Counter()
        pred: Counter[str] = Counter()
        for r in rows:
            ref[r["category"]] += 1
            pred[r["predicted"]] += 1
            if r["correct"]:
                tp[r["category"]] += 1
        out = {}
        for c in ref.keys() | pred.keys():
            p, rc = ratio(tp[c], pred[c]), ratio(tp[c], ref[c])
            out[c] = {"precision": p, "recall": rc, "f1": ratio(2 * p * rc, p + rc)}[metric]
        return out

    return stat


def extraction_stat(metric: str) -> Stat:
    """Per-category format validity or required-field rate of extraction verdicts."""
    key = {"format_validity": "valid", "required_fields": "complete"}[metric]

    def stat(rows: Rows) -> dict[str, float]:
        n: Counter[str] = Counter()
        ok: Counter[str] = Counter()
        for r in rows:
            n[r["category"]] += 1
            ok[r["category"]] += bool(r[key])
        return {c: ratio(ok[c], n[c]) for c in n}

    return stat


def paired_interval(
    baseline: Rows,
    candidate: Rows,
    stat: Stat,
    categories: Sequence[str],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """``category -> (low, high)`` of candidate - baseline; rows aligned by position."""
    rng = random.Random(seed)
    n = len(baseline)
    deltas: dict[str, list[float]] = {c: [] for c in categories}
    if n == 0 or resamples <= 0:  # nothing to resample: no intervals
        return {}
    positions = range(n)
    for _ in range(resamples):
        idx = rng.choices(positions, k=n)
        b = stat([baseline[i] for i in idx])
        c = stat([candidate[i] for i in idx])
        for cat in categories:
            deltas[cat].append(c.get(cat, 0.0) - b.get(cat, 0.0))
    tail = (1 - level) / 2
    return {cat: (_quantile(d, tail), _quantile(d, 1 - tail)) for cat, d in deltas.items()}


def _quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method)."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
