"""``data check`` as one call: leakage between the manifest's splits, the
``--write-clean`` copy, and the rest of the checks.

Layer: judging rooms - data (edge: reads the splits, writes the clean copy when one is
asked for; returns data, prints nothing).  ``check_data`` resolves the threshold and the
text fields from ``data_checks`` when they are not given, refuses a clean copy that
would replace the training file or land in a pinned folder (before the long search),
runs ``leakage.check_leakage``, writes the copy without the training records that repeat
eval or test (refused when the training file changed meanwhile), and summarises
categories, lengths, images and counts.  ``serve_data`` is a rank other than 0 under
``--distributed``: the same splits, its share of each signed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.data import leak_report, leakage
from ftmanifest.data.clean import CleanCopy, fingerprint, refuse_input, write_clean
from ftmanifest.data.parallel import cores, default_jobs
from ftmanifest.data.splits import image_splits_of, refuse_into_pinned, splits_of
from ftmanifest.data.stats import Collector
from ftmanifest.data.summary import DataSummary, summarise
from ftmanifest.errors import UsageError
from ftmanifest.manifest import LoadedManifest, load_manifest
from ftmanifest.progress import ProgressSink


@dataclass(frozen=True)
class DataCheck:
    leakage: leak_report.LeakageReport
    summary: DataSummary
    clean: CleanCopy | None = None

    @property
    def ok(self) -> bool:
        return self.leakage.ok and self.summary.ok


def check_data(
    manifest: Path,
    *,
    threshold: float | None = None,
    fields: Sequence[str] = (),
    examples: int = 5,
    jobs: int | None = None,
    write_clean_to: Path | None = None,
    allow_outside: bool = False,
    signer: Any = None,
    progress: ProgressSink | None = None,
) -> DataCheck:
    """The check of ``manifest``'s data.  ``threshold`` and ``fields`` default to
    ``data_checks.near_threshold`` and ``data_checks.text_fields``; ``jobs`` to
    every core (one for small inputs), 0 meaning every core; ``signer`` brings
    every rank's share of the signing under ``--distributed``; ``progress`` counts
    the records read (out of the counts the manifest pins, when it pins them all)."""
    loaded = load_manifest(manifest)
    checks = loaded.manifest.data_checks
    source = "--threshold" if threshold is not None else "data_checks.near_threshold"
    threshold = checks.near_threshold if threshold is None else threshold
    fields = list(fields) or list(checks.text_fields)
    splits = splits_of(loaded, allow_outside=allow_outside, fields=fields)
    train = [s for s in splits if s.kind == "train"]
    if write_clean_to is not None and len(train) != 1:
        raise UsageError(
            "--write-clean needs exactly one training split",
            path=str(manifest),
            field="data",
            expected="one data entry with role: train",
            observed=f"{len(train)}",
            hint="run without --write-clean, or keep one training entry",
        )
    before = None
    if write_clean_to is not None and train[0].shards:
        raise UsageError(
            "--write-clean writes a copy of one training file; this split is a folder of "
            f"{len(train[0].shards)} shards",
            path=str(train[0].path),
            field="--write-clean",
            expected="a training split that is one file",
            observed="a folder of shards",
            hint="drop the records data check names from their shards, or join the shards "
            "into one file and point the entry at it",
        )
    if write_clean_to is not None:
        refuse_input(train[0].path, write_clean_to)
        refuse_into_pinned(write_clean_to, loaded, "--write-clean")
        before = fingerprint(train[0].path)
    if jobs is None:  # a folder of shards is taken as large: its size would cost a stat a file
        jobs = cores() if any(s.shards for s in splits) else default_jobs([s.path for s in splits])
    jobs = jobs or cores()
    if progress is not None:
        progress.add_total(0, items=_pinned_records(loaded, splits))
    collector = Collector(checks.label)  # counted while the leakage check reads
    report = leakage.check_leakage(splits, threshold=threshold, examples=examples,
                                   tolerance=checks.tolerance, jobs=jobs, signer=signer,
                                   progress=progress, collector=collector)  # fmt: skip
    report.threshold_source = source
    clean = None
    if write_clean_to is not None:
        drop = report.leaking[train[0].name]
        clean = write_clean(train[0].path, train[0].format, drop, write_clean_to, before)
    text = splits_of(loaded, allow_outside=allow_outside, fields=fields)
    images = image_splits_of(loaded, allow_outside=allow_outside)
    summary = summarise(loaded, text, images, allow_outside=allow_outside,
                        counted=collector.stats)  # fmt: skip
    return DataCheck(report, summary, clean)


def _pinned_records(loaded: LoadedManifest, splits: Sequence[leak_report.Split]) -> int:
    """The records the manifest pins for ``splits``, or 0 when it leaves one unpinned."""
    pinned = {entry.name: entry.records for entry in loaded.manifest.data}
    counts = [pinned.get(split.name) for split in splits]
    return 0 if any(n is None for n in counts) else sum(n for n in counts if n is not None)


def serve_data(
    manifest: Path,
    comm: Any,
    signer: Any,
    *,
    fields: Sequence[str] = (),
    allow_outside: bool = False,
) -> None:
    """A rank other than 0: the same splits as rank 0, its share of each signed."""
    loaded = load_manifest(manifest)
    fields = list(fields) or list(loaded.manifest.data_checks.text_fields)
    leakage.serve(comm, splits_of(loaded, allow_outside=allow_outside, fields=fields), signer)
