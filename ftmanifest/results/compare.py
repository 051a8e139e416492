"""Comparing a candidate's results with a baseline's, guard by guard.

Layer: judging rooms - results (pure core: plain results dicts in, a ``Comparison``
out).  Two results files are comparable only when they share the split's data digest,
the evaluation procedure and the task (the manifest's); else every guard is moot and the
comparison refuses (``guard.not-comparable``).  Every guard of ``experiment.guards`` is
then evaluated on the candidate:

* ``per_category``: for each category (the guard's list, or every category
  of either run), a drop ``baseline - candidate`` over ``max_drop`` refuses
  (``guard.per-category-drop``) whatever the average did; under ``minimum``
  refuses (``guard.minimum``).  When both files carry per-example verdicts, a
  seeded paired bootstrap gives the delta's 95 % interval, and a passing
  category whose lower bound is below ``-max_drop`` is a warning
  (``guard.not-established``): the data cannot tell it from a real drop.
* ``metric``: ``accuracy``, ``macro_f1``, ``micro_f1`` (or an extraction
  rate, ``field_exact_match``): ``guard.metric-drop`` / ``guard.minimum``.
* ``format_validity`` / ``required_fields``: the candidate's rate under
  ``min_rate`` refuses (``guard.format-validity`` / ``guard.required-fields``).

A guard measured on another split than the results' is not evaluated (a
warning, ``guard.not-evaluated``).  Examples whose verdict changed are listed
per category (improved / regressed ids), so a gain limited to a few examples
is visible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ftmanifest.results.guards import CategoryRow, Comparison, Evaluator, GuardRow, find
from ftmanifest.results.score import id_key

if TYPE_CHECKING:
    from ftmanifest.findings import Finding
    from ftmanifest.manifest.model import Manifest

__all__ = ["CategoryRow", "Comparison", "GuardRow", "changed_examples", "compare"]


def _comparability(manifest: Manifest, base: dict[str, Any], cand: dict[str, Any]) -> list[Finding]:
    out = []
    task = manifest.experiment.task
    for name, res in (("baseline", base), ("candidate", cand)):
        if res["task"] != task:
            out.append(
                find(
                    ("experiment", "task"),
                    "guard.not-comparable",
                    f"the {name} was scored as {res['task']}, the manifest's task is {task}",
                    expected=str(task),
                    observed=res["task"],
                    hint="score both runs with this manifest",
                )
            )
    checks = (
        ("split", ("data",), base["split"]["digest"], cand["split"]["digest"]),
        ("split name", ("data",), base["split"]["name"], cand["split"]["name"]),
        ("evaluation procedure", ("evaluation", "procedure"), base["procedure"], cand["procedure"]),
    )
    for what, loc, b, c in checks:
        if b != c:
            out.append(
                find(
                    loc,
                    "guard.not-comparable",
                    f"baseline and candidate differ in their {what}",
                    expected=f"baseline's {b}",
                    observed=str(c),
                    hint="score the baseline on the same split with the same procedure",
                )
            )
    return out


def _shared(base: dict[str, Any], cand: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """Both runs' verdicts on their common ids, aligned, in id order."""
    b = {(type(e["id"]).__name__, e["id"]): e for e in base["examples"]}
    c = {(type(e["id"]).__name__, e["id"]): e for e in cand["examples"]}
    keys = sorted(b.keys() & c.keys(), key=lambda k: id_key(k[1]))
    return [b[k] for k in keys], [c[k] for k in keys]


def _ok(example: dict[str, Any]) -> bool:
    return (
        bool(example["correct"])
        if "correct" in example
        else bool(example["valid"] and example["complete"])
    )


def changed_examples(bs: list[Any], cs: list[Any]) -> dict[str, dict[str, list[str | int]]]:
    out: dict[str, dict[str, list[str | int]]] = {}
    for b, c in zip(bs, cs, strict=True):
        if _ok(b) != _ok(c):
            row = out.setdefault(b["category"], {"improved": [], "regressed": []})
            row["improved" if _ok(c) else "regressed"].append(b["id"])
    return dict(sorted(out.items()))


def compare(
    manifest: Manifest,
    baseline: dict[str, Any],
    candidate: dict[str, Any],
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> Comparison:
    """Evaluate every guard of ``manifest`` on ``candidate`` against ``baseline``."""
    problems = _comparability(manifest, baseline, candidate)
    if problems:
        return Comparison(comparable=False, findings=problems)
    out = Comparison(comparable=True)
    bs, cs = _shared(baseline, candidate)
    out.changed = changed_examples(bs, cs)
    ctx = Evaluator(baseline, candidate, bs, cs, resamples, seed, out)
    for n, guard in enumerate(manifest.experiment.guards):
        ctx.evaluate(n, guard)
    return out
