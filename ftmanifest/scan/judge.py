"""Which scan findings fail a check: one decision, used by scan, verify and audit.

Layer: judging rooms - judging room (scan).  ``fails`` is the rule: an ``info`` row
never fails; a file that could not be scanned (``not-scanned``) fails unless the caller
allows it (``scan --allow-not-scanned``; verify and audit never do); every other finding
fails.  ``judge`` is what ``ftmanifest scan`` does with a result: the baseline applied,
a baseline or redacted copies written when asked, and whether the scan refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ftmanifest.findings import Finding
from ftmanifest.scan import baseline as bl
from ftmanifest.scan.redact import write_redacted
from ftmanifest.scan.text.readers import sniff

if TYPE_CHECKING:
    from ftmanifest.scan.engine import ScanResult

NOT_SCANNED = "not-scanned"


def fails(finding: Finding, *, allow_not_scanned: bool = False) -> bool:
    """Whether this finding fails the check it was found in."""
    if finding.severity == "info":
        return False
    return not (finding.kind == NOT_SCANNED and allow_not_scanned)


def failing(findings: Iterable[Finding], *, allow_not_scanned: bool = False) -> list[Finding]:
    """The findings that fail the check, in their order."""
    return [f for f in findings if fails(f, allow_not_scanned=allow_not_scanned)]


@dataclass
class Judged:
    """A scan judged: the rows to show, the summary, and the verdict."""

    findings: list[Finding]
    summary: dict[str, object]
    refused: bool
    baseline_written: int | None = None  # findings accepted in to ``write_baseline``


def judge(
    result: ScanResult,
    paths: Sequence[Path],
    *,
    baseline: Path | None = None,
    write_baseline: Path | None = None,
    redact_to: Path | None = None,
    overwrite: bool = False,
    allow_not_scanned: bool = False,
    write: bool = True,
) -> Judged:
    """``ftmanifest scan``'s verdict on ``result`` (a scan of ``paths``).

    ``write_baseline`` accepts every finding (written only when ``write``, so
    under ``--distributed`` rank 0 alone writes) and never refuses; findings
    in ``baseline`` are suppressed; ``redact_to`` gets redacted copies of the
    scanned text files (also only when ``write``).
    """
    findings = result.findings
    written = None
    if write_baseline is not None and write:
        written = bl.write(write_baseline, findings, bl.previous_reasons(write_baseline))
    suppressed = 0
    if baseline is not None:
        findings, suppressed = bl.apply(findings, bl.load(baseline), str(baseline))
    if redact_to is not None and write:
        _redact(paths, redact_to, result.findings, result.files, overwrite=overwrite)
    summary = {**result.summary(), "suppressed": suppressed}
    refused = write_baseline is None and bool(
        failing(findings, allow_not_scanned=allow_not_scanned)
    )
    return Judged(findings, summary, refused, written)


def _redact(
    paths: Sequence[Path],
    redact_to: Path,
    findings: Iterable[Finding],
    files: Iterable[str],
    *,
    overwrite: bool,
) -> None:
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        if f.path is not None:
            by_path.setdefault(f.path, []).append(f)
    for name in files:
        src = Path(name)
        if sniff(src) not in ("text", "empty"):
            continue
        rel = next(
            (src.resolve().relative_to(p.resolve()) for p in paths
             if p.is_dir() and p.resolve() in src.resolve().parents),
            Path(src.name),
        )  # fmt: skip
        write_redacted(src, redact_to / rel, by_path.get(name, []), overwrite=overwrite)
