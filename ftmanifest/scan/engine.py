"""Walk paths, sniff formats, dispatch to scanners, run them on both cores.

Layer: edge (reads files).  Text is streamed in bounded chunks cut at
newlines; big files are split into byte ranges scanned by a process pool and
their line numbers are stitched back together.  Anything that cannot be read
(unknown binary, decode failure, over the size cap, missing optional backend)
becomes a ``not-scanned`` finding: never silently clean.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ftmanifest.errors import InputNotFoundError
from ftmanifest.findings import Finding, sort_findings
from ftmanifest.scan import text as readers
from ftmanifest.scan.text import not_scanned, scan_text

RANGE = 16 << 20  # bytes per pool task
POOL_MIN = 24 << 20  # below this, scanning inline beats starting workers
TEXT_FORMATS = ("text", "gzip", "parquet")
BINARY_FORMATS = ("safetensors", "pickle", "torch-zip", "torch-legacy", "npy", "npz", "zip")


@dataclass(frozen=True)
class ScanOptions:
    secrets: bool = True
    pii: bool = True
    pickles: bool = True
    max_bytes: int = 64 << 30  # size cap per file
    jobs: int = 0  # 0: os.cpu_count()
    engine: str | None = None  # None/"auto", "hyperscan" or "re"
    ner: bool = False


@dataclass
class ScanResult:
    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    bytes_scanned: int = 0

    def summary(self) -> dict[str, object]:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.kind] = counts.get(f.kind, 0) + 1
        return {"files": len(self.files), "bytes": self.bytes_scanned, "counts": counts}


def iter_files(paths: Iterable[Path]) -> Iterator[Path]:
    for p in paths:
        if not p.exists():
            raise InputNotFoundError("path does not exist", path=str(p), hint="check the path")
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__"))
                for name in sorted(files):
                    yield Path(root, name)
        else:
            yield p


def detect(path: Path) -> str:
    try:
        from ftmanifest.scan.sniff import detect_format
    except ImportError:
        return readers.sniff(path)
    return detect_format(path)


def _text_ranges(path: Path, size: int) -> list[tuple[int, int]]:
    if size <= RANGE:
        return [(0, size)]
    return [(s, min(size, s + RANGE)) for s in range(0, size, RANGE)]


def _scan_range(path: str, start: int, end: int, opts: ScanOptions) -> tuple[list[Finding], int]:
    return readers.scan_text_range(
        Path(path), start, end, secrets=opts.secrets, pii=opts.pii, engine=opts.engine
    )


def _binary(path: Path, fmt: str, opts: ScanOptions) -> list[Finding]:
    try:
        from ftmanifest.scan.binary import scan_binary
    except ImportError:
        return [not_scanned(path, f"{fmt} scanner not available in this build")]
    found = scan_binary(path, fmt, partial(scan_text, secrets=opts.secrets, pii=opts.pii))
    if not opts.pickles:
        found = [f for f in found if f.kind != "unsafe-pickle"]
    return found


def scan_paths(paths: Iterable[Path], opts: ScanOptions | None = None) -> ScanResult:
    """Scan files and directories; returns sorted findings and counts."""
    opts = opts or ScanOptions()
    result = ScanResult()
    jobs = opts.jobs or os.cpu_count() or 1
    text_tasks: list[tuple[Path, int, int]] = []
    for path in iter_files(paths):
        result.files.append(str(path))
        try:
            size = path.stat().st_size
            fmt = "empty" if size == 0 else detect(path)
        except OSError as exc:
            result.findings.append(not_scanned(path, f"unreadable ({exc.strerror})"))
            continue
        if size > opts.max_bytes:
            result.findings.append(
                not_scanned(path, f"{size} bytes is over the size cap", "raise --max-size")
            )
            continue
        if fmt == "empty":
            continue
        result.bytes_scanned += size
        if opts.ner and fmt in TEXT_FORMATS:
            result.findings.append(
                not_scanned(
                    path,
                    "names/addresses: no NER backend is installed",
                    "install a NER backend or drop --ner",
                )  # fmt: skip
            )
        if fmt == "text":
            text_tasks += [(path, s, e) for s, e in _text_ranges(path, size)]
        elif fmt == "gzip":
            result.findings += readers.scan_gzip(path, opts.secrets, opts.pii, opts.engine)
        elif fmt == "parquet":
            result.findings += readers.scan_parquet(path, opts.secrets, opts.pii, opts.engine)
        elif fmt in BINARY_FORMATS:
            result.findings += _binary(path, fmt, opts)
        else:
            result.findings.append(not_scanned(path, f"unknown binary format ({fmt})"))
    result.findings += _run_text(text_tasks, opts, jobs)
    result.findings = sort_findings(result.findings)
    return result


def _run_text(tasks: list[tuple[Path, int, int]], opts: ScanOptions, jobs: int) -> list[Finding]:
    total = sum(e - s for _, s, e in tasks)
    if jobs > 1 and total >= POOL_MIN and len(tasks) > 1:
        ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
            futures = [pool.submit(_scan_range, str(p), s, e, opts) for p, s, e in tasks]
            outs = [f.result() for f in futures]
    else:
        outs = [_scan_range(str(p), s, e, opts) for p, s, e in tasks]
    findings: list[Finding] = []
    lines_before: dict[Path, int] = {}
    for (path, _, _), (found, newlines) in zip(tasks, outs, strict=True):
        base = lines_before.get(path, 0)
        findings += [f._replace(line=f.line + base) if base and f.line else f for f in found]
        lines_before[path] = base + newlines
    return findings
