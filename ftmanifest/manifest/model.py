"""The whole manifest: the single source of truth for the schema.

Layer: pure core - manifest (pure).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ftmanifest.manifest.data import DataChecks, DataEntry, Evaluation, Export, Security
from ftmanifest.manifest.environment import Environment, ModelSource
from ftmanifest.manifest.experiment import Experiment
from ftmanifest.manifest.training import Distributed, Method, Seeds, Training
from ftmanifest.manifest.types import Strict


class Manifest(Strict):
    """A fine-tuning experiment, declared completely enough to reproduce it."""

    # the literal is ftmanifest.manifest.FORMAT_VERSION (a test keeps them equal)
    ftmanifest: Literal[1] = Field(description="Manifest format version.")
    experiment: Experiment = Field(description="Identity, hypothesis, budget and guards.")
    model: ModelSource = Field(description="The base model, pinned.")
    environment: Environment = Field(
        default_factory=Environment, description="Software and hardware, pinned."
    )
    seeds: Seeds = Field(default_factory=Seeds, description="Seeds and determinism flags.")
    data: list[DataEntry] = Field(default_factory=list, description="Data sets and splits.")
    data_checks: DataChecks = Field(
        default_factory=DataChecks, description="Leakage tolerance, text and label fields."
    )
    method: Method | None = Field(default=None, description="What is trained: full, lora, peft.")
    training: Training = Field(default_factory=Training, description="Step sizing.")
    distributed: Distributed = Field(default_factory=Distributed, description="Process layout.")
    evaluation: Evaluation = Field(default_factory=Evaluation, description="Evaluation.")
    export: Export | None = Field(default=None, description="The deliverable.")
    security: Security = Field(default_factory=Security, description="Confidentiality policy.")
