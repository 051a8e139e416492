"""Everything ``data check`` reports besides leakage: statistics, images, counts and digests.

Layer: judging rooms - data (edge: runs ``stats``, ``images`` and ``counts`` over the
manifest's splits; the verdicts are theirs and ``categories``').  Returns
data; the CLI renders it and exits 1 when any finding is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ftmanifest.data.categories import Categories, category_findings, minimum
from ftmanifest.data.counts import count_findings
from ftmanifest.data.images import ImageReport, check_images
from ftmanifest.data.stats import SplitStats, collect, length_findings
from ftmanifest.data.tokens import load_tokenizer
from ftmanifest.findings import SEVERITY_ORDER, Finding
from ftmanifest.manifest import LoadedManifest


@dataclass
class DataSummary:
    stats: list[SplitStats]
    images: ImageReport
    minimums: dict[str, tuple[int, str]]  # eval/test split -> (fewest per category, rule)
    seq_len: int | None
    tokenizer: str  # where the tokenizer came from, or why there is none
    tokens: bool  # whether tokens were counted
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


def summarise(
    loaded: LoadedManifest,
    text: Sequence[Any],
    images: Sequence[Any],
    *,
    allow_outside: bool = False,
    counts: bool = True,
    counted: dict[str, SplitStats] | None = None,
) -> DataSummary:
    """Statistics of ``text`` and ``images`` (``leak_report.Split``s of ``loaded``), and,
    with ``counts``, every data entry's record count and digest against the manifest.
    ``counted``: the statistics a pass over the splits already counted (without
    tokens; ``stats.Collector``), used for the splits it holds when no tokenizer is
    there to count tokens with."""
    m = loaded.manifest
    seq_len = m.training.seq_len
    tokenizer, where = load_tokenizer(loaded, allow_outside=allow_outside) if text else (None, "")
    counted = counted if tokenizer is None else None
    stats = [
        counted[s.name]
        if counted and s.name in counted
        else collect(s, label=m.data_checks.label, tokenizer=tokenizer, seq_len=seq_len)
        for s in text
    ]
    image_report = check_images(images, m.data_checks.tolerance)
    cats = [Categories(s.name, s.role, s.path, s.categories, s.unlabelled) for s in stats]
    cats += [
        Categories(s.name, s.role, s.path, {k: c.files for k, c in s.classes.items()})
        for s in image_report.splits
    ]
    findings = category_findings(cats, m)
    findings += length_findings(stats, seq_len, where)
    findings += image_report.findings
    if counts:
        findings += count_findings(loaded, allow_outside=allow_outside)
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    minimums = {c.split: minimum(m, c.split) for c in cats if c.kind in ("eval", "test")}
    return DataSummary(
        stats, image_report, minimums, seq_len, where, tokenizer is not None, findings
    )
