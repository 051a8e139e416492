"""``ftmanifest scan PATH...``: secrets, personal data and unsafe pickles.

Layer: commands - edge (parsing and printing).  Results are cached by file digest
(``--no-cache`` scans everything again).  Exit codes: 0 clean, 1 findings outside
the baseline (a ``not-scanned`` file counts unless ``--allow-not-scanned``),
2 unusable input or usage.  ``--distributed`` (under torchrun): the ranks
split the files (``distributed.scan``), rank 0 prints what a single-process
scan prints, the others one line each, and every rank exits with the job's
code (the worst rank's); rank 0 alone writes a baseline or redacted copies.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.cli._args import add_distributed_arguments, add_format_argument
from ftmanifest.cli._ranks import deciding, in_job
from ftmanifest.distributed import shard
from ftmanifest.distributed.agree import agree_arguments, who
from ftmanifest.distributed.scan import job_findings, scan_distributed
from ftmanifest.distributed.shard import no_rank_timeout
from ftmanifest.errors import FtManifestError, UsageError
from ftmanifest.output import note, render_findings
from ftmanifest.progress import Progress
from ftmanifest.safe_text import escape
from ftmanifest.scan.cache import scan_cached
from ftmanifest.scan.engine import ScanOptions, ScanResult
from ftmanifest.scan.judge import judge
from ftmanifest.scan.redact import check_target
from ftmanifest.scan.text import phones
from ftmanifest.scan.text.matcher import engine_name

if TYPE_CHECKING:
    from ftmanifest.findings import Finding
    from ftmanifest.scan.engine import ScanOptions, ScanResult
    from ftmanifest.scan.judge import Judged

EXIT_OK, EXIT_FINDINGS = 0, 1


DESCRIPTION = """\
Scan files and folders for secrets, personal data and unsafe pickles (model
files that would run code when loaded).  Results are cached by file digest.
Findings listed in --baseline are suppressed (an entry accepts one finding of
one file's content: a changed file's findings come back); --write-baseline
accepts every current finding; --redact-to writes redacted copies of the text files.
Exit 0 clean, 1 findings outside the baseline (a file that could not be
scanned counts unless --allow-not-scanned), 2 unusable input or usage.
"""

EXAMPLES = """\
examples:
  ftmanifest scan data/
  ftmanifest scan data/ models/ --baseline scan-baseline.json --format sarif
  ftmanifest scan data/ --redact-to data-redacted/ --no-pickles
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "scan",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="scan data and artifacts for secrets, PII, pickles",
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or folders to scan")
    add_format_argument(p, sarif=True)
    p.add_argument("--baseline", type=Path, metavar="FILE",
                   help="the baseline to compare against: accepted findings, each bound to one "
                   "file's content (JSON); matches are suppressed")  # fmt: skip
    p.add_argument("--write-baseline", type=Path, metavar="FILE",
                   help="write every current finding as accepted and exit 0")  # fmt: skip
    p.add_argument("--redact-to", type=Path, metavar="DIR",
                   help="write redacted copies of text files under DIR")  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="let --redact-to replace files")
    p.add_argument("--no-secrets", action="store_true", help="skip the secret rules")
    p.add_argument("--no-pii", action="store_true", help="skip the personal-data rules")
    p.add_argument("--no-pickles", action="store_true", help="skip the pickle/artifact checks")
    p.add_argument("--ner", action="store_true", help="names/addresses via a NER backend")
    p.add_argument("--allow-not-scanned", action="store_true",
                   help="files that could not be scanned do not fail the run")  # fmt: skip
    p.add_argument("--phone-regions", metavar="CC,CC",
                   help="regions whose national phone formats are recognised (default: "
                   "$FTMANIFEST_PHONE_REGIONS or US,GB,DE,FR,ES,IT,NL,AU,IN,BR)")  # fmt: skip
    p.add_argument("--max-size", type=_count, default=64 << 30, metavar="BYTES",
                   help="per-file size cap; larger files are not scanned")  # fmt: skip
    p.add_argument("--jobs", type=_count, default=0, metavar="N",
                   help="worker processes (default: 0, all cores)")  # fmt: skip
    p.add_argument("--no-cache", action="store_true",
                   help="scan every file again; do not read or write the result cache")  # fmt: skip
    add_distributed_arguments(p, "the ranks split the files, rank 0 reports, all exit alike")
    p.set_defaults(func=run)


def _count(text: str) -> int:
    """A whole number >= 0, refused by argparse (exit 2) otherwise."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def _phone_regions(option: str | None) -> tuple[str, ...]:
    """The regions to use, checked now: a bad code is a usage error, not a crash later."""

    codes = None if option is None else [c for c in option.split(",") if c.strip()]
    try:
        phones.set_regions(codes)
    except ValueError as exc:
        source = "--phone-regions" if option is not None else "FTMANIFEST_PHONE_REGIONS"
        raise UsageError(
            f"{source}: {exc}",
            field=source,
            expected="ISO 3166 region codes known to libphonenumber, e.g. US,GB,DE",
            observed=option or os.environ.get("FTMANIFEST_PHONE_REGIONS", ""),
            hint="fix the list, e.g. --phone-regions US,GB",
        ) from None
    return phones.regions()


def run(args: argparse.Namespace) -> int:

    opts = _options(args)
    if args.distributed:
        return _run_distributed(args, opts)
    no_rank_timeout(args.rank_timeout, "scan PATH")
    with Progress(label="scanning", unit="files") as bar:
        result = scan_cached(args.paths, opts, use_cache=not args.no_cache, progress=bar)
    judged = _judge(args, result)
    _print(args, judged.findings, judged.summary)
    return EXIT_FINDINGS if judged.refused else EXIT_OK


def _options(args: argparse.Namespace) -> ScanOptions:
    """The scan's options, every usage error raised here (before any rank joins)."""

    engine_name()  # a bad $FTMANIFEST_SCAN_ENGINE is a usage error now, not in a worker
    if args.redact_to:
        check_target(args.redact_to, args.paths)
    return ScanOptions(
        secrets=not args.no_secrets, pii=not args.no_pii, pickles=not args.no_pickles,
        max_bytes=args.max_size, jobs=args.jobs, ner=args.ner,
        phone_regions=_phone_regions(args.phone_regions),
    )  # fmt: skip


def _judge(args: argparse.Namespace, result: ScanResult, *, write: bool = True) -> Judged:
    """``scan.judge`` with this command's options; says when a baseline was written."""

    judged = judge(
        result, args.paths, baseline=args.baseline, write_baseline=args.write_baseline,
        redact_to=args.redact_to, overwrite=args.overwrite,
        allow_not_scanned=args.allow_not_scanned, write=write,
    )  # fmt: skip
    if judged.baseline_written is not None:
        where = escape(str(args.write_baseline))
        note(f"ftmanifest: wrote {judged.baseline_written} accepted findings to {where}")
    return judged


def _print(args: argparse.Namespace, findings: list[Finding], summary: dict[str, object]) -> None:

    sys.stdout.write(render_findings(findings, args.format, summary=summary))
    if args.format == "text":
        shown = [f for f in findings if f.severity != "info"]
        found = f"{len(shown)} finding(s)" if shown else "nothing found"
        note(f"{summary['files']} file(s) scanned, {found}")


def _run_distributed(args: argparse.Namespace, opts: ScanOptions) -> int:
    """Every rank scans its share; rank 0 prints the single-process report."""
    from dataclasses import replace

    job, timeout = shard.launched(args.rank_timeout, "scan PATH")
    if not opts.jobs:  # the node's cores are shared by its ranks
        opts = replace(opts, jobs=max(1, (os.cpu_count() or 1) // job.local_world_size))

    def body(comm: Any) -> int:
        agree_arguments(comm, deciding(args, SCAN_ARGUMENTS))
        failure: FtManifestError | None = None
        try:
            result = scan_distributed(comm, args.paths, opts, use_cache=not args.no_cache)
        except FtManifestError as exc:
            failure, result = exc, ScanResult()  # still take part in the gathers below
        result = job_findings(comm, result)  # what another node's copy holds, too
        shown: Judged | None = None
        if failure is None:
            try:
                shown = _judge(args, result, write=job.is_main)
            except FtManifestError as exc:
                failure = exc
        codes = shard.exit_codes(comm, failure.exit_code if failure else _code(shown))
        if failure is not None:
            raise failure
        assert shown is not None
        code = max(codes)
        failed = [r for r, c in enumerate(codes) if c and c != _code(shown)]
        if job.is_main:
            _print(args, shown.findings, shown.summary)
            if failed:
                sys.stderr.write(f"ftmanifest: exit {code}: {who(failed, comm.hosts)} failed; "
                                 "see its output there\n")  # fmt: skip
        else:
            n = sum(1 for f in shown.findings if f.severity != "info")
            note(
                f"rank {job.rank} of {job.world_size}: {shown.summary['files']} file(s), "
                f"{n} finding(s) in the job; job exit {code} (rank 0 prints the report)"
            )
        return code

    return in_job(job, timeout, body, args.format)


SCAN_ARGUMENTS = (
    "paths", "baseline", "allow_not_scanned", "no_secrets", "no_pii", "no_pickles",
    "max_size", "ner", "phone_regions",
)  # fmt: skip
"""scan's arguments that decide the verdict: the same on every rank (a baseline by
what the file holds)."""


def _code(judged: Judged | None) -> int:
    return EXIT_FINDINGS if judged is not None and judged.refused else EXIT_OK
