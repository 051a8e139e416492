"""An audit's data in the shape the handoff report renders.

Layer: judging rooms - pure core (dicts in, dict out).  ``audit``
(``AuditReport.to_dict()``) and ``report`` (``ftmanifest.results.report``, documented
input shape) were written to their own shapes; this is the one place that maps one onto
the other, so neither needs to know the other's internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest


def report_data(
    audit: Mapping[str, Any], manifest: Manifest, limits: str | None = None
) -> dict[str, Any]:
    """The report's input from an audit's ``to_dict()`` and the loaded manifest model."""
    deliverable = audit.get("deliverable") or {}
    binding = deliverable.get("binding") or None
    return {
        "manifest": audit.get("manifest"),
        "signature": audit.get("signature"),
        "experiment": _experiment(manifest),
        "deliverable": {
            "path": deliverable.get("path"),
            "kind": deliverable.get("kind"),
            "tree_digest": deliverable.get("tree_digest"),
            "files": deliverable.get("files") or [],
            "binding": _binding(binding),
            "config": _method(manifest),
        },
        "model": audit.get("model"),
        "environment": audit.get("environment"),
        "data": audit.get("data") or [],
        "training": _training(manifest),
        "comparison": _comparison(audit.get("comparison"), manifest),
        "findings": audit.get("findings") or [],
        "history": history(audit.get("history")),
        "limits": limits,
        "verdict": "ready" if audit.get("ok") else "refused",
    }


def _binding(binding: Any) -> dict[str, Any] | None:
    if not isinstance(binding, Mapping):
        return None
    keys = ("binding", "signers", "base_tensor_digest", "ok")
    return {("envelope" if k == "binding" else k): binding.get(k) for k in keys}


def _method(manifest: Manifest) -> dict[str, Any] | None:
    method = getattr(manifest, "method", None)
    return method.model_dump(mode="json", exclude_none=True) if method is not None else None


def _experiment(manifest: Manifest) -> dict[str, Any] | None:
    experiment = getattr(manifest, "experiment", None)
    if experiment is None:
        return None
    return {k: getattr(experiment, k, None) for k in ("id", "task", "hypothesis")}


def _training(manifest: Manifest) -> dict[str, Any] | None:
    """The recipe: the training section as the manifest states it."""
    training = getattr(manifest, "training", None)
    if training is None:
        return None
    return training.model_dump(mode="json", exclude_none=True, exclude_defaults=True) or None


def _comparison(comparison: Mapping[str, Any] | None, manifest: Manifest) -> dict[str, Any] | None:
    result = (comparison or {}).get("result")
    if not isinstance(result, Mapping):
        return None
    guards = list(getattr(manifest.experiment, "guards", []) or [])

    def guard(i: object) -> Any:
        return guards[i] if isinstance(i, int) and 0 <= i < len(guards) else None

    return {
        "guards": [
            {
                "name": f"guards[{g.get('guard')}] {g.get('kind')} {g.get('metric') or ''}".strip(),
                "verdict": g.get("verdict"),
                "detail": f"expected {g.get('expected')}, observed {g.get('observed')}",
            }
            for g in result.get("guards") or []
        ],
        "per_category": [
            {
                "category": c.get("category"),
                "metric": getattr(guard(c.get("guard")), "metric", None),
                "baseline": c.get("baseline"),
                "candidate": c.get("candidate"),
                "max_drop": getattr(guard(c.get("guard")), "max_drop", None),
                "ci_low": (c.get("interval") or [None, None])[0],
                "ci_high": (c.get("interval") or [None, None])[1],
                "verdict": c.get("verdict"),
            }
            for c in result.get("categories") or []
        ],
        "changed_examples": result.get("changed") or {},
    }


def history(summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ledger's summary of the experiment as the report's key/value rows."""
    if not summary:
        return None
    by = summary.get("by_status") or {}
    rows: dict[str, Any] = {
        "ledger": summary.get("ledger"),
        "attempts": summary.get("attempts"),
        "outcomes": ", ".join(f"{n} {s}" for s, n in sorted(by.items())) or "none",
        "over budget": "; ".join(
            f"{r['attempt']}: {', '.join(r['over'])}" for r in summary.get("over_budget") or []
        )
        or "none",
    }
    for split, use in (summary.get("sealed") or {}).items():
        rows[f"sealed split {split}"] = f"{use['family_uses']} use(s) by the experiment's family"
    return rows
