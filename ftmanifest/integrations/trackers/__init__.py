"""Links from a guarded run to the experiment trackers the Trainer reports to.

Layer: edges (integrations).  When ``TrainingArguments.report_to`` names MLflow
or Weights & Biases, the Trainer's own tracker callback has started a run by
the time the guard's ``on_train_begin`` runs (the Trainer calls its reporting
callbacks before the user's).  ``link_trackers`` tags that run with
``ftmanifest.digest``, ``ftmanifest.experiment`` and ``ftmanifest.attempt`` and
returns what the attempt records about it (kind, run id, where it lives), so
a tracker run and a ledger attempt each name the other.

One module per tracker, registered in ``TRACKERS``.  Each takes its client
from ``sys.modules`` (the Trainer's callback imported it), so nothing here
imports mlflow or wandb, and ``lint``/``verify`` never load them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ftmanifest.integrations.trackers import mlflow_run, wandb_run
from ftmanifest.integrations.trackers.uri import public_uri

__all__ = ["TRACKERS", "Tracker", "link_trackers", "public_uri", "tags_for"]


class Tracker(Protocol):
    kind: str

    def link(self, tags: Mapping[str, str]) -> dict[str, Any] | None:
        """Tag the tracker's active run with ``tags``; what the attempt records
        about that run, or None when the tracker has no active run."""


TRACKERS: dict[str, Tracker] = {"mlflow": mlflow_run.MLFLOW, "wandb": wandb_run.WANDB}


def tags_for(record: Mapping[str, Any]) -> dict[str, str]:
    """The tags a tracker run gets from the guard's run record."""
    experiment = record.get("experiment") or {}
    manifest = record.get("manifest") or {}
    return {
        "ftmanifest.digest": str(manifest.get("digest") or ""),
        "ftmanifest.experiment": str(experiment.get("id") or ""),
        "ftmanifest.attempt": str(record.get("attempt") or ""),
    }


def link_trackers(
    report_to: Iterable[str] | str | None, tags: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Tag the run of every tracker in ``report_to``; the links, and a warning
    for each tracker whose run could not be tagged (training goes on: the
    tracker is a convenience, the ledger is the record)."""
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    links: list[dict[str, Any]] = []
    problems: list[str] = []
    for name in dict.fromkeys(names):
        tracker = TRACKERS.get(name)
        if tracker is None:
            continue
        try:
            link = tracker.link(tags)
        except Exception as exc:  # a tracker's own failure must not stop training
            problems.append(
                f"tracker {name}: run not tagged with the ledger attempt "
                f"({type(exc).__name__}: {exc}); tag it by hand: {dict(tags)}"
            )
            links.append({"kind": name, "run_id": None, "error": f"{type(exc).__name__}: {exc}"})
            continue
        if link is None:
            problems.append(
                f"tracker {name}: report_to names it but it has no active run at "
                "on_train_begin; the attempt records no run id for it"
            )
            continue
        links.append(link)
    return links, problems
