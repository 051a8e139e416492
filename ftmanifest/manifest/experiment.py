"""The ``experiment`` section: id, lineage, hypothesis, budget and guards.

Layer: pure core - manifest (pure).  Requirements digest items 1 (hypothesis first) and
7 (variants).  What an experiment *is* lives here; what *happened* to it (started,
finished, abandoned or invalid, with a reason) lives in its run records (``ftmanifest
runs``), so recording it never breaks the manifest's signature.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ftmanifest.manifest.types import Identifier, NonEmpty, PositiveInt, Rate, Strict

Task = Literal["classification", "extraction", "generation", "other"]


class Budget(Strict):
    """What one run may spend; variants compare at the same budget."""

    max_steps: PositiveInt | None = Field(default=None, description="Optimizer steps at most.")
    max_hours: float | None = Field(default=None, gt=0, description="Wall-clock hours at most.")
    max_gpu_hours: float | None = Field(
        default=None, gt=0, description="Accelerator-hours at most, summed over devices."
    )
    disk_gib: float | None = Field(
        default=None,
        gt=0,
        description="Free disk the run needs (checkpoints, logs, evaluation, retries), in GiB.",
    )


class PerCategoryGuard(Strict):
    """A metric checked for every category: no category may drop more than allowed."""

    kind: Literal["per_category"] = Field(description="Guard type.")
    metric: NonEmpty = Field(description="Metric name, e.g. f1, precision, recall.")
    split: NonEmpty | None = Field(
        default=None, description="Name of the data entry it is measured on."
    )
    categories: list[NonEmpty] | Literal["all"] = Field(
        default="all", description="Categories checked; 'all' means every category present."
    )
    max_drop: float = Field(ge=0, description="Largest allowed drop versus the baseline.")
    minimum: float | None = Field(default=None, description="Optional absolute floor.")


class MetricGuard(Strict):
    """One global metric with a floor and/or a maximum drop versus the baseline."""

    kind: Literal["metric"] = Field(description="Guard type.")
    metric: NonEmpty = Field(description="Metric name.")
    split: NonEmpty | None = Field(default=None, description="Data entry it is measured on.")
    max_drop: float | None = Field(default=None, ge=0, description="Largest allowed drop.")
    minimum: float | None = Field(default=None, description="Absolute floor.")


class FormatValidityGuard(Strict):
    """Share of outputs that parse in the expected format."""

    kind: Literal["format_validity"] = Field(description="Guard type.")
    format: NonEmpty = Field(description="Expected output format, e.g. json, a schema path.")
    min_rate: Rate = Field(description="Lowest acceptable share of valid outputs (0..1).")
    split: NonEmpty | None = Field(default=None, description="Data entry it is measured on.")


class RequiredFieldsGuard(Strict):
    """Share of outputs that carry every required field."""

    kind: Literal["required_fields"] = Field(description="Guard type.")
    fields: list[NonEmpty] = Field(min_length=1, description="Fields every output must carry.")
    min_rate: Rate = Field(description="Lowest acceptable share of complete outputs (0..1).")
    split: NonEmpty | None = Field(default=None, description="Data entry it is measured on.")


Guard = Annotated[
    PerCategoryGuard | MetricGuard | FormatValidityGuard | RequiredFieldsGuard,
    Field(discriminator="kind"),
]


class Experiment(Strict):
    """Who runs what, why, and what must not get worse."""

    id: Identifier = Field(description="Unique experiment id.")
    parent: Identifier | None = Field(
        default=None, description="Id of the experiment this one is a variant of."
    )
    task: Task | None = Field(
        default=None, description="Kind of behaviour trained: classification, extraction..."
    )
    hypothesis: str | None = Field(
        default=None, description="The behaviour to improve and the expected effect."
    )
    changes: dict[str, Any] = Field(
        default_factory=dict,
        description="The one set of parameters changed versus the parent: field path -> value.",
    )
    owner: str | None = Field(default=None, description="Person or team answerable for it.")
    budget: Budget = Field(default_factory=Budget, description="Compute budget.")
    guards: list[Guard] = Field(
        default_factory=list, description="What must not get worse, checked against the baseline."
    )
