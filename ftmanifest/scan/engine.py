"""Walk paths, sniff formats, dispatch to scanners, run them on both cores.

Layer: judging rooms - edge (reads files).  Text is streamed in bounded chunks cut at
newlines; big files are split into byte ranges scanned by a process pool
(forked after the matcher is compiled, so workers share it) and their line
numbers are stitched back together.  Chunks and ranges overlap by
``readers.OVERLAP`` bytes, so a match across a cut is found once.  Anything
that cannot be read (unknown binary, decode failure, over the size cap,
missing optional backend) becomes a ``not-scanned`` finding: never silently
clean.  A ``progress`` sink counts the files judged and the bytes read, as they
are (a large text file range by range); the caller that listed the files adds
their number to its total.
"""

from __future__ import annotations

import multiprocessing
import os
import stat
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ftmanifest import held
from ftmanifest.findings import Finding, sort_findings
from ftmanifest.progress import ProgressSink
from ftmanifest.scan.artifacts.binary import BINARY_FORMATS, scan_binary
from ftmanifest.scan.artifacts.compressed import open_inflated
from ftmanifest.scan.artifacts.sniff import NOT_JUDGED, detect_format
from ftmanifest.scan.names import name_findings
from ftmanifest.scan.small import read_small
from ftmanifest.scan.text import phones, readers
from ftmanifest.scan.text.matcher import matcher
from ftmanifest.scan.text.text import scan_text
from ftmanifest.scan.unscanned import not_scanned
from ftmanifest.scan.walk import walk

RANGE = 16 << 20  # most bytes per pool task
RANGE_MIN = 1 << 20  # fewest bytes per pool task (each opens the file and aligns)
TASKS_PER_JOB = 8  # tasks per worker, so that uneven ranges still balance
POOL_MIN = 8 << 20  # below this, scanning inline beats forking workers (~0.1 s)
TEXT_FORMATS = ("text", "gzip", "parquet")


@dataclass(frozen=True)
class ScanOptions:
    """What ``scan_paths`` looks for (secrets, PII, unsafe pickles) and how hard."""

    secrets: bool = True
    pii: bool = True
    pickles: bool = True
    max_bytes: int = 64 << 30  # size cap per file
    jobs: int = 0  # 0: os.cpu_count()
    engine: str | None = None  # None/"auto", "hyperscan" or "re"
    ner: bool = False
    phone_regions: tuple[str, ...] | None = None  # None: $FTMANIFEST_PHONE_REGIONS or default


@dataclass
class ScanResult:
    """What ``scan_paths`` found: sorted findings, and the files and bytes it read."""

    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # every file scanned
    bytes_scanned: int = 0

    def summary(self) -> dict[str, object]:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.kind] = counts.get(f.kind, 0) + 1
        return {"files": len(self.files), "bytes": self.bytes_scanned, "counts": counts}


def iter_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The regular files under ``paths`` (see ``walk``; what cannot be walked is dropped)."""
    yield from walk(paths)[0]


def _text_ranges(files: list[tuple[Path, int]], jobs: int) -> list[tuple[Path, int, int]]:
    """Byte ranges for the pool: about ``TASKS_PER_JOB`` per worker, balanced."""
    total = sum(size for _, size in files)
    piece = max(RANGE_MIN, min(RANGE, -(-total // (jobs * TASKS_PER_JOB))))
    return [(path, s, min(size, s + piece)) for path, size in files for s in range(0, size, piece)]


def _batches(tasks: list[tuple[Path, int, int]], workers: int) -> list[list[tuple[str, int, int]]]:
    """Consecutive ranges joined into pool tasks of about ``RANGE_MIN`` bytes, at
    least ``TASKS_PER_JOB`` per worker while there are ranges enough: a task per small
    file cost more in the pool's pickling and wake-ups than its scan (a folder of
    100,000 one-line files took 2.6 times as long on two workers as on one)."""
    total = sum(e - s for _, s, e in tasks)
    want = max(1, min(RANGE_MIN, total // (workers * TASKS_PER_JOB)))
    out: list[list[tuple[str, int, int]]] = []
    batch: list[tuple[str, int, int]] = []
    size = 0
    for path, start, end in tasks:
        batch.append((str(path), start, end))
        size += end - start
        if size >= want:
            out.append(batch)
            batch, size = [], 0
    if batch:
        out.append(batch)
    return out


def _scan_batch(
    batch: list[tuple[str, int, int]], opts: ScanOptions
) -> list[tuple[list[Finding], int]]:
    return [_scan_range(p, s, e, opts) for p, s, e in batch]


def _scan_range(path: str, start: int, end: int, opts: ScanOptions) -> tuple[list[Finding], int]:
    return readers.scan_text_range(
        Path(path), start, end, secrets=opts.secrets, pii=opts.pii, engine=opts.engine
    )


def _binary(path: Path, fmt: str, opts: ScanOptions, *, text: bool = True) -> list[Finding]:
    """``scan_binary``; ``text=False`` judges only what is not text (pickles, containers)."""
    scanner = partial(scan_text, secrets=opts.secrets, pii=opts.pii) if text else None
    found = scan_binary(path, fmt, scanner)
    if not opts.pickles:
        found = [f for f in found if f.kind != "unsafe-pickle"]
    return found


def scan_paths(
    paths: Iterable[Path], opts: ScanOptions | None = None, *, progress: ProgressSink | None = None
) -> ScanResult:
    """Scan files and directories; returns sorted findings and counts.

    What cannot be walked (unreadable folders, broken links, FIFOs, links out
    of the folder) is a ``not-scanned`` error finding, never silently nothing.
    """
    tops = [Path(p) for p in paths]
    files, problems = walk(tops)
    if progress is not None:
        progress.add_total(0, items=len(files))
    result = scan_files(files, opts, progress=progress)
    options = opts or ScanOptions()
    names = name_findings(tops, files, secrets=options.secrets, pii=options.pii)
    result.findings = sort_findings(result.findings + problems + names)
    return result


def scan_files(
    files: Iterable[Path], opts: ScanOptions | None = None, *, progress: ProgressSink | None = None
) -> ScanResult:
    """Scan regular files that ``walk`` listed; one that changed kind since is a row."""
    opts = opts or ScanOptions()
    with regions(opts):
        return _scan_files(files, opts, progress)


@contextmanager
def regions(opts: ScanOptions) -> Iterator[None]:
    """The phone regions of ``opts`` while scanning (set before workers fork: they
    inherit them), and the process's own again afterwards."""
    if opts.phone_regions is None:
        yield
        return

    before = phones.regions()
    phones.set_regions(opts.phone_regions)
    try:
        yield
    finally:
        phones.set_regions(before)  # process state: the next scan starts as this one did


def _scan_files(
    files: Iterable[Path], opts: ScanOptions, progress: ProgressSink | None
) -> ScanResult:
    result = ScanResult()
    jobs = opts.jobs or os.cpu_count() or 1
    listed = list(files)
    result.files = [str(p) for p in listed]
    done, rest = read_small(listed, opts, jobs=jobs, progress=progress)
    for one in done:
        result.findings += one.findings
        result.bytes_scanned += one.size
    text_files: list[tuple[Path, int]] = []
    for path in (listed[i] for i in rest):
        texts, read = len(text_files), result.bytes_scanned
        _scan_other(path, opts, result, text_files)
        if progress is not None and len(text_files) == texts:  # text: counted as it is read
            progress.advance(result.bytes_scanned - read, items=1)
    result.findings += _run_text(text_files, opts, jobs, progress)
    result.findings = sort_findings(result.findings)
    return result


def _scan_other(
    path: Path, opts: ScanOptions, result: ScanResult, text_files: list[tuple[Path, int]]
) -> None:
    """Judge one file ``read_small`` left: its rows into ``result``, or, a text file,
    onto ``text_files`` for the ranges."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # swapped for a FIFO since it was listed
            raise OSError(0, "not a regular file any more")
        size = st.st_size
        fmt = "empty" if size == 0 else detect_format(path)
    except OSError as exc:
        result.findings.append(not_scanned(path, f"unreadable ({exc.strerror})"))
        return
    if size > opts.max_bytes:
        result.findings.append(
            not_scanned(path, f"{size} bytes is over the size cap", "raise --max-size")
        )
        return
    if fmt == "empty":
        return
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
        text_files.append((path, size))
    elif fmt == "gzip" and _gzip_of_tar(path):
        result.findings += _binary(path, "gzip", opts)  # each member as what it holds
    elif fmt == "gzip":
        # Judged by content twice over: a gzip'd protocol-0 pickle looks like
        # text, so the pickle walk runs first; text keeps its line numbers.
        judged = _binary(path, "gzip", opts, text=False)
        texts = readers.scan_gzip(path, opts.secrets, opts.pii, opts.engine)
        if judged:
            texts = [f for f in texts if f.kind != "not-scanned"]
        result.findings += judged + texts
    elif fmt == "parquet":
        result.findings += readers.scan_parquet(path, opts.secrets, opts.pii, opts.engine)
    elif fmt in BINARY_FORMATS:  # gzip, also in it, is routed above
        result.findings += _binary(path, fmt, opts)
    elif fmt in NOT_JUDGED:
        result.findings.append(
            not_scanned(path, f"{NOT_JUDGED[fmt]}: this version does not judge it",
                        "inspect it by hand, or load it only from a source you trust")
            ._replace(rule="scan.not-judged", extra={"format": fmt})
        )  # fmt: skip
    else:
        result.findings.append(not_scanned(path, f"unknown binary format ({fmt})"))


class _Done:
    """Counts each text range as its result comes back, in order: its bytes, and its
    file once its last range is in (the ranges of a file follow each other)."""

    def __init__(self, tasks: list[tuple[Path, int, int]], progress: ProgressSink | None) -> None:
        self.tasks, self.progress, self.at = tasks, progress, 0

    def __call__(self, out: tuple[list[Finding], int]) -> tuple[list[Finding], int]:
        if self.progress is not None:
            _p, start, end = self.tasks[self.at]
            last = self.at + 1 == len(self.tasks) or self.tasks[self.at + 1][1] == 0
            self.progress.advance(end - start, items=int(last))
        self.at += 1
        return out


def _gzip_of_tar(path: Path) -> bool:
    """A ``.tar.gz``: its members are files of their own, not lines of one text."""
    try:
        with open_inflated(held.open_binary(path), "gzip", 1 << 20) as fh:
            head = fh.read(512)
    except (OSError, EOFError, ValueError):
        return False  # judged as gzip, which names what is wrong with it
    return len(head) == 512 and head[257:262] == b"ustar"


def _run_text(
    files: list[tuple[Path, int]], opts: ScanOptions, jobs: int, progress: ProgressSink | None
) -> list[Finding]:
    total = sum(size for _, size in files)
    tasks = _text_ranges(files, jobs)
    done = _Done(tasks, progress)
    if jobs > 1 and total >= POOL_MIN and len(tasks) > 1:
        fork = os.name == "posix"
        if fork:  # compile once here; forked workers inherit the database
            matcher(opts.secrets, opts.pii, opts.engine)
        ctx = multiprocessing.get_context("fork" if fork else "spawn")
        kept = held.current()  # a forked worker inherits the descriptors verify kept
        inherit = kept.descriptors() if fork and kept is not None else {}
        with ProcessPoolExecutor(
            max_workers=min(jobs, len(tasks)),
            mp_context=ctx,
            initializer=held.adopt,
            initargs=(inherit,),
        ) as pool:
            batches = _batches(tasks, min(jobs, len(tasks)))
            futures = [pool.submit(_scan_batch, batch, opts) for batch in batches]
            outs = [done(out) for f in futures for out in f.result()]
    else:
        outs = [done(_scan_range(str(p), s, e, opts)) for p, s, e in tasks]
    findings: list[Finding] = []
    base = 0  # lines before this range in its file: ranges of one file follow each other
    for (_, start, _), (found, newlines) in zip(tasks, outs, strict=True):
        if start == 0:
            base = 0  # a new file (or the same file listed again: its lines count from 1)
        findings += [
            f._replace(line=f.line + base) if base and f.line is not None else f for f in found
        ]
        base += newlines
    return findings
