"""Evaluating each guard of a manifest on a candidate's results.

Layer: judging rooms - results (pure core).  The rows and the ``Comparison`` they fill,
and one evaluator per guard kind; ``ftmanifest.results.compare`` checks that the two
runs are comparable first and documents every rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ftmanifest.findings import Finding
from ftmanifest.manifest.experiment import (
    FormatValidityGuard,
    MetricGuard,
    PerCategoryGuard,
    RequiredFieldsGuard,
)
from ftmanifest.results.bootstrap import classification_stat, extraction_stat, paired_interval

if TYPE_CHECKING:
    from ftmanifest.manifest.experiment import Guard

EPS = 1e-12  # float noise: a drop of exactly max_drop passes
SHOWN_CATEGORIES = 20  # the split's categories named in one finding
CATEGORY_METRICS = {
    "classification": ("f1", "precision", "recall"),
    "extraction": ("format_validity", "required_fields"),
}


@dataclass(frozen=True)
class CategoryRow:
    """One category under one per-category guard."""

    guard: int
    metric: str
    category: str
    baseline: float
    candidate: float
    interval: tuple[float, float] | None
    verdict: str  # pass, fail, not-established

    @property
    def delta(self) -> float:
        return self.candidate - self.baseline


@dataclass(frozen=True)
class GuardRow:
    """One guard's verdict: pass, fail, not-established or not-evaluated."""

    guard: int
    kind: str
    metric: str
    verdict: str
    expected: str
    observed: str


@dataclass
class Comparison:
    comparable: bool
    guards: list[GuardRow] = field(default_factory=list)
    categories: list[CategoryRow] = field(default_factory=list)
    changed: dict[str, dict[str, list[str | int]]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "comparable": self.comparable,
            "passed": self.passed,
            "guards": [vars(g) for g in self.guards],
            "categories": [
                {**vars(c), "delta": c.delta, "interval": list(c.interval) if c.interval else None}
                for c in self.categories
            ],
            "changed": self.changed,
            "findings": [f.to_dict() for f in self.findings],
        }


def find(loc: tuple[str | int, ...], rule: str, message: str, **kw: Any) -> Finding:
    return Finding.at(loc, kind="guard", rule=rule, message=message, **kw)


@dataclass
class Evaluator:
    """Evaluates guards of one comparison and records rows and findings in ``out``."""

    base: dict[str, Any]
    cand: dict[str, Any]
    bs: list[Any]
    cs: list[Any]
    resamples: int
    seed: int
    out: Comparison

    def row(self, n: int, guard: Guard, metric: str, verdict: str, exp: str, obs: str) -> None:
        self.out.guards.append(GuardRow(n, guard.kind, metric, verdict, exp, obs))

    def fail(self, n: int, field_: str, rule: str, message: str, **kw: Any) -> None:
        self.out.findings.append(find(("experiment", "guards", n, field_), rule, message, **kw))

    def evaluate(self, n: int, guard: Guard) -> None:
        metric = getattr(guard, "metric", guard.kind)
        split = self.cand["split"]["name"]
        if guard.split is not None and guard.split != split:
            self.row(n, guard, metric, "not-evaluated", f"split {guard.split}", f"split {split}")
            self.fail(
                n,
                "split",
                "guard.not-evaluated",
                f"guard measured on {guard.split!r}, these results are on {split!r}",
                severity="warning",
                expected=guard.split,
                observed=split,
                hint=f"score the {guard.split!r} split to evaluate it",
            )
        elif isinstance(guard, PerCategoryGuard):
            self.per_category(n, guard)
        elif isinstance(guard, MetricGuard):
            self.metric(n, guard)
        else:
            rate = self.rate(guard)
            kind = (
                "format-validity" if isinstance(guard, FormatValidityGuard) else "required-fields"
            )
            self.floor(n, guard, kind, rate, guard.min_rate, "min_rate", f"guard.{kind}")

    def floor(
        self,
        n: int,
        guard: Guard,
        metric: str,
        value: float | None,
        low: float,
        field_: str,
        rule: str,
    ) -> None:
        if value is None:
            self.unknown(n, guard, metric)
            return
        ok = value + EPS >= low
        self.row(n, guard, metric, "pass" if ok else "fail", f">= {low:.4f}", f"{value:.4f}")
        if not ok:
            self.fail(
                n,
                field_,
                rule,
                f"{metric} {value:.4f} is under {low:.4f}",
                expected=f">= {low}",
                observed=f"{value:.4f}",
                hint="the candidate does not meet this guard; do not hand it off",
            )

    def unknown(self, n: int, guard: Guard, metric: str) -> None:
        self.row(n, guard, metric, "fail", "a scored metric", "not in the results")
        self.fail(
            n,
            "metric",
            "guard.unknown-metric",
            f"{metric!r} is not among the {self.cand['task']} metrics of these results",
            observed=metric,
            hint="name a metric `ftmanifest score` computes",
        )

    def rate(self, guard: Guard) -> float | None:
        metrics = self.cand["metrics"]
        if not isinstance(guard, RequiredFieldsGuard):
            validity = metrics.get("format_validity")
            return validity if isinstance(validity, (int, float)) else None
        examples = self.cand["examples"]
        if not examples or "missing" not in examples[0]:
            return None
        wanted = set(guard.fields)
        done = sum(1 for e in examples if not wanted & set(e["missing"]))
        if not wanted <= set(metrics.get("required_field_names", [])):
            return None
        return done / len(examples)

    def metric(self, n: int, guard: Any) -> None:
        b, c = self.base["metrics"].get(guard.metric), self.cand["metrics"].get(guard.metric)
        if not isinstance(c, (int, float)) or not isinstance(b, (int, float)):
            self.unknown(n, guard, guard.metric)
            return
        if guard.minimum is not None:
            self.floor(n, guard, guard.metric, c, guard.minimum, "minimum", "guard.minimum")
        if guard.max_drop is not None:
            ok = b - c <= guard.max_drop + EPS
            self.row(
                n,
                guard,
                guard.metric,
                "pass" if ok else "fail",
                f"drop <= {guard.max_drop}",
                f"{b:.4f} -> {c:.4f}",
            )
            if not ok:
                self.fail(
                    n,
                    "max_drop",
                    "guard.metric-drop",
                    f"{guard.metric} dropped {b - c:.4f} ({b:.4f} -> {c:.4f})",
                    expected=f"drop <= {guard.max_drop}",
                    observed=f"{b - c:.4f}",
                    hint="the candidate regresses; do not hand it off",
                )

    def per_category(self, n: int, guard: Any) -> None:
        task, metric = self.cand["task"], guard.metric
        if metric not in CATEGORY_METRICS.get(task, ()):
            self.unknown(n, guard, metric)
            return
        bper, cper = self.base["metrics"]["per_category"], self.cand["metrics"]["per_category"]
        cats = sorted(bper.keys() | cper.keys()) if guard.categories == "all" else guard.categories
        unknown = self.unknown_categories(n, guard)
        cats = [c for c in cats if c not in unknown]
        stat = (classification_stat if task == "classification" else extraction_stat)(metric)
        ci = (
            paired_interval(self.bs, self.cs, stat, cats, resamples=self.resamples, seed=self.seed)
            if self.bs
            else {}
        )
        verdicts = []
        for cat in cats:
            b = float(bper.get(cat, {}).get(metric, 0.0))
            c = float(cper.get(cat, {}).get(metric, 0.0))
            interval = ci.get(cat)
            verdict = "pass"
            if b - c > guard.max_drop + EPS:
                verdict = "fail"
                self.fail(
                    n,
                    "max_drop",
                    "guard.per-category-drop",
                    f"category {cat!r}: {metric} dropped {b - c:.4f} ({b:.4f} -> {c:.4f}), "
                    f"over the allowed {guard.max_drop}",
                    expected=f"drop <= {guard.max_drop}",
                    observed=f"{b - c:.4f}",
                    hint="a category regressed even if the average improved; fix it first",
                    extra={"category": cat, "baseline": b, "candidate": c, "drop": b - c},
                )
            elif interval is not None and interval[0] < -guard.max_drop - EPS:
                verdict = "not-established"
                self.fail(
                    n,
                    "max_drop",
                    "guard.not-established",
                    f"category {cat!r}: {metric} passes ({b:.4f} -> {c:.4f}) but the 95% "
                    f"interval of the change [{interval[0]:.4f}, {interval[1]:.4f}] crosses "
                    f"-{guard.max_drop}",
                    severity="warning",
                    expected=f"lower bound >= -{guard.max_drop}",
                    observed=f"{interval[0]:.4f}",
                    hint="evaluate on more examples to establish the pass",
                    extra={"category": cat, "interval": list(interval)},
                )
            if guard.minimum is not None and c + EPS < guard.minimum:
                verdict = "fail"
                self.fail(
                    n,
                    "minimum",
                    "guard.minimum",
                    f"category {cat!r}: {metric} {c:.4f} is under {guard.minimum}",
                    expected=f">= {guard.minimum}",
                    observed=f"{c:.4f}",
                    hint="the candidate does not meet this guard's floor",
                )
            verdicts.append(verdict)
            self.out.categories.append(CategoryRow(n, metric, cat, b, c, interval, verdict))
        verdicts += ["fail"] * len(unknown)
        worst = next((v for v in ("fail", "not-established") if v in verdicts), "pass")
        failed = sum(1 for v in verdicts if v == "fail")
        named = f", {len(unknown)} not in the split" if unknown else ""
        self.row(
            n,
            guard,
            metric,
            worst,
            f"each drop <= {guard.max_drop}",
            f"{failed} of {len(verdicts)} categories fail{named}",
        )

    def unknown_categories(self, n: int, guard: Any) -> list[str]:
        """The categories ``guard`` names that no example of the split has, each a
        finding: such a category would pass with nothing to judge (a typo, or a
        category renamed in the data).  The split's categories are the examples'
        (the records' own, as ``score`` took them from the split)."""
        if guard.categories == "all":
            return []
        have = sorted({str(e["category"]) for r in (self.base, self.cand) for e in r["examples"]})
        shown = ", ".join(repr(c) for c in have[:SHOWN_CATEGORIES])
        shown += f" and {len(have) - SHOWN_CATEGORIES} more" if len(have) > SHOWN_CATEGORIES else ""
        unknown = [c for c in guard.categories if c not in have]
        for cat in unknown:
            self.fail(
                n,
                "categories",
                "guard.unknown-category",
                f"guard {n} names category {cat!r}, which no record of split "
                f"{self.cand['split']['name']!r} has: it would pass with nothing to judge",
                expected=f"one of the split's categories: {shown or 'none'}",
                observed=cat,
                hint="correct the category's name in the guard (a typo, or renamed in the "
                "data), then lock and sign the manifest and compare again",
                extra={"category": cat, "split_categories": have},
            )
        return unknown
