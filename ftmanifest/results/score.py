"""Metrics from predictions: classification and extraction, deterministic.

Layer: judging rooms - results (pure core; no I/O).  ``score`` takes the parsed
predictions and returns the ``metrics`` and ``examples`` parts of a results file
(``ftmanifest.results.resultsfile`` adds what they were computed from).

Classification.  Categories are the union of reference and predicted labels,
sorted.  Per category c: precision = TP / (TP + FP), recall = TP / (TP + FN),
F1 = 2PR / (P + R), support = number of references equal to c.  A ratio whose
denominator is 0 (no prediction of c, no reference of c, or P + R = 0) is 0,
as scikit-learn's ``zero_division=0``.  accuracy = correct / examples; macro F1
= the unweighted mean of the per-category F1; micro F1 = F1 over the pooled
counts, which for single-label classification equals accuracy.

Extraction.  An output is *valid* when it parses as JSON and, given a JSON
Schema, validates against it (``jsonschema``, the schema's own draft).  A
field is *present* when the parsed output is an object whose value for it is
neither missing, null nor an empty string; an output is *complete* when every
required field is present.  ``format_validity`` and ``required_fields.rate``
are shares of all examples; ``required_fields.per_field`` the share per field;
``field_exact_match`` the share of (example, field) pairs, over the reference's
fields, whose predicted value equals the reference's.  Examples are grouped
per category (``"-"`` when none is given).

Examples are listed sorted by id (integers first), so a results file does not
depend on the order of the prediction lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ftmanifest.jsonschema_lib import jsonschema as load_jsonschema
from ftmanifest.results.predictions import Prediction

NO_CATEGORY = "-"


def id_key(ident: str | int) -> tuple[int, int, str]:
    """Sort order of example ids: integers by value, then strings."""
    return (0, ident, "") if isinstance(ident, int) else (1, 0, ident)


def ratio(num: float, den: float) -> float:
    """``num / den``, or 0 when ``den`` is 0 (documented above)."""
    return num / den if den else 0.0


def category_scores(pairs: Sequence[tuple[str, str]]) -> dict[str, dict[str, float]]:
    """Precision, recall, F1 and support per category of ``(reference, predicted)``."""
    cats = sorted({r for r, _ in pairs} | {p for _, p in pairs})
    out: dict[str, dict[str, float]] = {}
    for c in cats:
        tp = sum(1 for r, p in pairs if r == c and p == c)
        predicted = sum(1 for _, p in pairs if p == c)
        support = sum(1 for r, _ in pairs if r == c)
        precision, recall = ratio(tp, predicted), ratio(tp, support)
        f1 = ratio(2 * precision * recall, precision + recall)
        out[c] = {"precision": precision, "recall": recall, "f1": f1, "support": support}
    return out


def classification_metrics(pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    per = category_scores(pairs)
    correct = sum(1 for r, p in pairs if r == p)
    # pooled counts: every wrong answer is one FP (its label) and one FN (the reference's)
    micro_p = ratio(correct, len(pairs))
    micro_f1 = ratio(2 * micro_p * micro_p, 2 * micro_p)
    return {
        "examples": len(pairs),
        "accuracy": ratio(correct, len(pairs)),
        "macro_f1": ratio(sum(s["f1"] for s in per.values()), len(per)),
        "micro_f1": micro_f1,
        "per_category": per,
    }


def parse_output(text: str, schema: Mapping[str, Any] | None) -> tuple[bool, Any]:
    """(valid, parsed value) of one raw model output."""
    try:
        value = json.loads(text)
    except ValueError:
        return False, None
    if schema is not None:
        validator = load_jsonschema().validators.validator_for(schema)(schema)
        if next(validator.iter_errors(value), None) is not None:
            return False, value
    return True, value


def present(value: Any, name: str) -> bool:
    return isinstance(value, dict) and value.get(name) not in (None, "")


def extraction_verdicts(
    items: Sequence[Prediction], schema: Mapping[str, Any] | None, fields: Sequence[str]
) -> list[dict[str, Any]]:
    """Per example: id, category, valid, complete, missing fields, matched/compared fields."""
    out = []
    for item in items:
        valid, value = parse_output(item.prediction, schema)
        missing = [f for f in fields if not present(value, f)]
        ref = item.reference if isinstance(item.reference, dict) else {}
        keys = list(fields) or sorted(ref)
        compared = [k for k in keys if k in ref]
        matched = sum(1 for k in compared if isinstance(value, dict) and value.get(k) == ref[k])
        out.append({
            "id": item.id,
            "category": item.category or NO_CATEGORY,
            "valid": valid,
            "complete": not missing,
            "missing": missing,
            "matched": matched,
            "compared": len(compared),
        })  # fmt: skip
    return out


def extraction_metrics(
    verdicts: Sequence[Mapping[str, Any]], fields: Sequence[str]
) -> dict[str, Any]:
    n = len(verdicts)

    def rates(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return {
            "examples": len(rows),
            "format_validity": ratio(sum(1 for v in rows if v["valid"]), len(rows)),
            "required_fields": ratio(sum(1 for v in rows if v["complete"]), len(rows)),
        }

    cats = sorted({v["category"] for v in verdicts})
    return {
        **rates(verdicts),
        "required_fields_per_field": {
            f: ratio(sum(1 for v in verdicts if f not in v["missing"]), n) for f in fields
        },
        "field_exact_match": ratio(
            sum(v["matched"] for v in verdicts), sum(v["compared"] for v in verdicts)
        ),
        "per_category": {c: rates([v for v in verdicts if v["category"] == c]) for c in cats},
    }


def score(
    items: Sequence[Prediction],
    task: str,
    *,
    schema: Mapping[str, Any] | None = None,
    fields: Sequence[str] = (),
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(metrics, examples)`` for ``task`` (classification or extraction)."""
    ordered = sorted(items, key=lambda i: id_key(i.id))
    if task == "classification":
        pairs = [(str(i.reference), i.prediction) for i in ordered]
        examples = [
            {"id": i.id, "category": r, "predicted": p, "correct": r == p}
            for i, (r, p) in zip(ordered, pairs, strict=True)
        ]
        return classification_metrics(pairs), examples
    verdicts = extraction_verdicts(ordered, schema, fields)
    return extraction_metrics(verdicts, fields), verdicts
