"""The ``data``, ``evaluation``, ``export`` and ``security`` sections.

Layer: pure core - manifest (pure).  Requirements digest items 2 (baseline first, sealed
test split), 3 (versioned data), 9 (deliverable) and 10 (confidentiality).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ftmanifest.manifest.retention import (
    BackupRetention,
    BackupsField,
    Duration,
    backup_retention,
)
from ftmanifest.manifest.types import (
    Digest,
    FileMode,
    FileRef,
    NonEmpty,
    NonNegativeInt,
    Strict,
)

Role = Literal["train", "eval", "test", "baseline-eval", "other"]
Binding = Literal["base_revision", "base_tree_digest", "manifest_digest"]
ScanMoment = Literal["verify", "audit"]


def _default_bindings() -> list[Binding]:
    return ["base_revision", "base_tree_digest"]


def _audit_only() -> list[ScanMoment]:
    return ["audit"]


class Script(Strict):
    """A cleaning or transformation step, pinned by digest."""

    path: NonEmpty = Field(description="Script path, relative to the manifest's folder.")
    digest: Digest | None = Field(default=None, description="sha256 digest of the script.")
    description: str | None = Field(default=None, description="What it does.")


class DataEntry(Strict):
    """One data set or split."""

    name: NonEmpty = Field(description="Name other sections refer to.")
    role: Role | None = Field(default=None, description="train, eval, test, baseline-eval, other.")
    path: NonEmpty = Field(description="File or folder, relative to the manifest's folder.")
    digest: Digest | None = Field(default=None, description="File or tree digest.")
    records: NonNegativeInt | None = Field(default=None, description="Number of records.")
    format: Literal["jsonl", "json", "csv", "tsv", "parquet", "text", "images", "other"] | None = (
        Field(default=None, description="Storage format.")
    )
    license: str | None = Field(
        default=None, description="License or rights under which it is used."
    )
    contains_personal_data: bool | None = Field(
        default=None, description="Whether it holds personal data (drives scanning and retention)."
    )
    sealed: bool = Field(
        default=False, description="Final test split: every use is counted, never tuned on."
    )
    cleaning: list[Script] = Field(default_factory=list, description="Cleaning rules applied.")
    transforms: list[Script] = Field(default_factory=list, description="Transformations applied.")


class PairTolerance(Strict):
    """How many duplicates one split pair may hold before `data check` refuses."""

    exact: NonNegativeInt | None = Field(
        default=None, description="Exact duplicates allowed; null: any (reported as a warning)."
    )
    near: NonNegativeInt | None = Field(
        default=None, description="Near duplicates allowed; null: any (reported as a warning)."
    )


def _strict_test() -> PairTolerance:
    return PairTolerance(exact=0)


def _strict_sealed() -> PairTolerance:
    return PairTolerance(exact=0, near=0)


class LeakTolerance(Strict):
    """Duplicates allowed per split pair; the sealed split's bound applies to any pair with it."""

    train_eval: PairTolerance = Field(default_factory=PairTolerance, description="Train vs eval.")
    train_test: PairTolerance = Field(default_factory=_strict_test, description="Train vs test.")
    eval_test: PairTolerance = Field(default_factory=PairTolerance, description="Eval vs test.")
    within_train: PairTolerance = Field(
        default_factory=PairTolerance, description="Repeats inside a training split."
    )
    within_eval: PairTolerance = Field(
        default_factory=PairTolerance, description="Repeats inside an eval or test split."
    )
    sealed: PairTolerance = Field(
        default_factory=_strict_sealed, description="Any other split vs the sealed split."
    )


class DataChecks(Strict):
    """What `ftmanifest data check` and `data sample` apply to the data entries."""

    near_threshold: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="Jaccard similarity of 3-word shingles from which two records are near "
        "duplicates.",
    )
    tolerance: LeakTolerance = Field(
        default_factory=LeakTolerance, description="Duplicates allowed per split pair."
    )
    text_fields: list[NonEmpty] = Field(
        default_factory=list,
        description="Keys or columns that are a record's text; empty: messages[].content, "
        "else prompt+completion, else text.",
    )
    label: NonEmpty | None = Field(
        default=None,
        description="Key or column naming a record's category; null: label, else category.",
    )
    target: NonEmpty | None = Field(
        default=None,
        description="Key or column holding the expected output; null: completion, the last "
        "assistant message, else the label.",
    )
    min_per_category: NonNegativeInt | None = Field(
        default=None,
        description="Fewest eval examples per category; null: enough to see the per-category "
        "guard's max_drop (about 2/max_drop^2), else 20.",
    )


class Baseline(Strict):
    """The base model's evaluation, kept to compare every variant with."""

    results: FileRef | None = Field(default=None, description="Baseline outputs/metrics file.")
    config: FileRef | None = Field(default=None, description="Evaluation config used.")


class Evaluation(Strict):
    """Same procedure for every variant."""

    procedure: NonEmpty | None = Field(
        default=None, description="Id of the evaluation procedure, shared across variants."
    )
    baseline: Baseline = Field(default_factory=Baseline, description="Baseline results.")


class Export(Strict):
    """The deliverable and what it stays bound to."""

    path: NonEmpty = Field(description="Output folder of the adapter or model.")
    kind: Literal["adapter", "model", "merged"] = Field(
        default="adapter", description="What is exported."
    )
    bind: list[Binding] = Field(
        default_factory=_default_bindings,
        description="Facts the export must carry and match when loaded.",
    )


class ScanPolicy(Strict):
    """What is scanned, and when."""

    secrets: bool = Field(default=True, description="Scan for secrets.")
    pii: bool = Field(default=True, description="Scan for personal data.")
    pickles: bool = Field(default=True, description="Scan pickles for unsafe imports.")
    on: list[ScanMoment] = Field(
        default_factory=_audit_only, description="Commands that run the scan."
    )
    baseline: str | None = Field(default=None, description="File of accepted fingerprints.")


class FileModes(Strict):
    """Most permissive mode allowed per artifact class."""

    data: FileMode = Field(default="0640", description="Raw and processed data.")
    checkpoints: FileMode = Field(default="0640", description="Checkpoints and adapters.")
    logs: FileMode = Field(default="0640", description="Training logs.")
    keys: FileMode = Field(default="0600", description="Private keys.")


class Retention(Strict):
    """How long each artifact class is kept, e.g. '30d'; null keeps forever."""

    checkpoints: Duration | None = Field(
        default=None,
        description="Intermediate checkpoints: a duration, e.g. 14d, 2w, 6m (months), 1y6m.",
    )
    logs: Duration | None = Field(default=None, description="Logs: a duration, e.g. 30d.")
    raw_data: Duration | None = Field(
        default=None, description="Raw data copies: a duration, e.g. 180d."
    )
    backups: BackupsField | None = Field(
        default=None,
        description="Encrypted backups: keep rules for `ftmanifest prune`. A bare duration "
        "(backups: 30d) means keep_within: 30d and is kept as written, so old signatures "
        "still verify.",
    )

    def backup_policy(self) -> BackupRetention | None:
        """``backups`` as keep rules (a bare duration becomes ``keep_within``)."""
        return backup_retention(self.backups)


class Security(Strict):
    """Confidentiality: scanning, permissions, retention, backups."""

    scan: ScanPolicy = Field(default_factory=ScanPolicy, description="Scan policy.")
    max_modes: FileModes = Field(default_factory=FileModes, description="File mode limits.")
    retention: Retention = Field(default_factory=Retention, description="Retention per class.")
    backup_recipients: list[NonEmpty] = Field(
        default_factory=list, description="age recipients (age1...) backups are encrypted to."
    )
    require_traced_data: bool = Field(
        default=False,
        description="The Trainer guard refuses a dataset it cannot trace to pinned files "
        "(a plain torch Dataset, a generator); false records it as a warning.",
    )
    rehash: Literal["on-stat-change", "always"] = Field(
        default="on-stat-change",
        description="When verify, run and the Trainer guard re-read pinned files: "
        "'on-stat-change' trusts the stat cache (a file whose device, inode, size, mtime and "
        "ctime are unchanged is not re-read; blind to writes through a shared mmap that change "
        "neither time), 'always' hashes every file on every check.",
    )
