"""Weights & Biases: put the tags in the run's config, name the run in the attempt.

Layer: edges (integrations).  W&B tags are bare labels, so the key-value tags
go to ``run.config`` (searchable and shown beside the Trainer's arguments).
The Trainer's ``WandbCallback`` calls ``wandb.init`` and imported ``wandb``;
this module only reads it from ``sys.modules``.  Offline runs keep the tags in
their run file, and ``wandb sync`` uploads them.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any


class WandbTracker:
    kind = "wandb"

    def link(self, tags: Mapping[str, str]) -> dict[str, Any] | None:
        wandb = sys.modules.get("wandb")
        run = None if wandb is None else wandb.run
        if run is None:
            return None
        run.config.update(dict(tags), allow_val_change=True)
        mode = getattr(getattr(run, "settings", None), "mode", None)
        return {
            "kind": self.kind,
            "run_id": run.id,
            "project": run.project or None,
            "entity": _entity(run),
            "mode": mode,
            "uri": None if mode == "offline" else run.url,
        }


def _entity(run: Any) -> str | None:
    try:
        return run.entity or None
    except Exception:  # offline runs may not know their entity
        return None


WANDB = WandbTracker()
