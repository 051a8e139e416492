"""MLflow: tag the active run, name it in the attempt.

Layer: edges (integrations).  The Trainer's ``MLflowCallback`` starts the run
(or joins ``MLFLOW_RUN_ID``) and imported ``mlflow``; this module only reads it
from ``sys.modules``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ftmanifest.integrations.trackers.uri import public_uri


class MlflowTracker:
    kind = "mlflow"

    def link(self, tags: Mapping[str, str]) -> dict[str, Any] | None:
        mlflow = sys.modules.get("mlflow")
        if mlflow is None:
            return None  # the Trainer's callback did not load it: it reports nothing
        run = mlflow.active_run()
        if run is None:
            return None
        mlflow.set_tags(dict(tags))
        return {
            "kind": self.kind,
            "run_id": run.info.run_id,
            "experiment_id": run.info.experiment_id,
            "uri": public_uri(mlflow.get_tracking_uri()),
        }


MLFLOW = MlflowTracker()
