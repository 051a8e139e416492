"""``ftmanifest verify M``: refuse when this machine, the model, the data or the
signature drifted from the manifest.

Layer: commands - edge.  Exit 0 clean, 1 drift (one row per difference), 2 an unusable
manifest or usage.  ``--distributed`` (under torchrun) verifies every rank
and compares the ranks (``ftmanifest.distributed.verify``): rank 0 prints the
report with a per-rank table on stdout; every other rank prints one line on
stderr (so the job's stdout stays one report, and one JSON document with
``--format json``); all ranks exit with the same code.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ftmanifest.cli._args import add_distributed_arguments
from ftmanifest.cli._ranks import deciding, in_job
from ftmanifest.cli._verify_report import (
    accepted_fields,
    add_verify_arguments,
    print_header,
    record_acceptances,
    report_and_print,
    verify_only,
)
from ftmanifest.distributed.agree import agree_arguments
from ftmanifest.distributed.fingerprint import strategy_from_env
from ftmanifest.distributed.shard import launched, no_rank_timeout
from ftmanifest.distributed.verify import verify_job
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED
from ftmanifest.output import note, table, to_json
from ftmanifest.probe.packages import TEST_VERSIONS, forced_versions
from ftmanifest.safe_text import escape

if TYPE_CHECKING:
    pass


DESCRIPTION = """\
Compare a manifest with what is here: this machine's environment, the model
and data files, the code commit and the signature (by a key in the trust
file); one row per difference.  A drift can be accepted on purpose with
--accept FIELD and its own --reason, recorded in the ledger.  The data scan
that the manifest's security policy asks for runs too.  Exit 0 clean, 1 drift
or a refused signature, 2 an unusable manifest or usage.
"""

EXAMPLES = """\
examples:
  ftmanifest verify exp.yaml
  ftmanifest verify exp.yaml --format json
  ftmanifest verify exp.yaml --accept 'data[0]' --reason 'relabelled one record on purpose'
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="compare a manifest with this machine, model, data, signature",
    )
    add_verify_arguments(p)
    add_distributed_arguments(p, "verify every rank and refuse when ranks differ (rank 0 reports)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    warn_test_override()
    if getattr(args, "distributed", False):
        return run_distributed(args)

    no_rank_timeout(args.rank_timeout, "verify M")
    report, code = report_and_print(args)
    if report.accepted:
        record_acceptances(report, "verified" if report.ok else "refused", ledger=args.ledger)
    return code


def warn_test_override() -> None:
    """Loud, on every run: a test-only package override is in force here."""

    forced = forced_versions()
    if forced:
        sys.stderr.write(
            f"warning: TEST OVERRIDE ACTIVE ({TEST_VERSIONS}, FTMANIFEST_TESTING=1): "
            f"{escape(', '.join(sorted(forced)))} reported with forced versions that match "
            "no pin; this verify does not judge what is installed\n"
        )


VERDICT_ARGUMENTS = ("accept", "no_signature", "trust", "threshold", "allow_outside", "code")
"""verify's arguments that decide the verdict: every rank must be given the same."""


def run_distributed(args: argparse.Namespace) -> int:
    """``verify --distributed``: join the job, agree on the arguments and the manifest,
    verify, judge; every rank prints, then waits for the others and exits with the
    job's code (``cli._ranks.in_job``)."""

    job, timeout = launched(args.rank_timeout, f"verify {args.manifest}")
    accept = accepted_fields(args)
    strategy = strategy_from_env(job.world_size)

    def body(comm: Any) -> int:
        agree_arguments(comm, deciding(args, VERDICT_ARGUMENTS))
        verdict, report = verify_job(
            comm,
            args.manifest,
            lambda hasher: verify_only(args, hasher),
            strategy=strategy,
            accept=accept,
            use_cache=not args.no_cache,
            allow_outside=args.allow_outside,
        )
        if job.rank != 0:
            note(rank_line(job.rank, verdict))
            return int(verdict.exit_code)
        print_job(args, verdict, report, strategy)
        if report is not None and (report.accepted or verdict.accepted):
            report.findings = list(verdict.rows)  # the record keeps the job's verdict
            report.accepted += verdict.accepted
            status = "verified" if verdict.ok else "refused"
            record_acceptances(report, status, ledger=args.ledger)
        return int(verdict.exit_code)

    return in_job(job, timeout, body, args.format)


def _word(code: int) -> str:
    return (
        "OK" if code == EXIT_OK else "REFUSED" if code == EXIT_REFUSED else f"ERROR (exit {code})"
    )


def rank_line(rank: int, verdict: Any) -> str:
    """What a rank other than 0 prints: its verdict, and whether it is the one named."""
    host = next((fp["host"] for fp in verdict.prints if fp["rank"] == rank), "?")
    head = f"rank {rank} ({escape(str(host))}): {_word(verdict.exit_code)}"
    named = verdict.named()
    if verdict.ok:
        return f"{head}, all {len(verdict.prints)} ranks agree with each other and the manifest"
    if rank in named:
        fields = ", ".join(escape(f) for f in dict.fromkeys(named[rank]))
        return f"{head}; this rank: {fields} (rank 0 prints the table)"
    if not named:
        return f"{head}: the job differs from the manifest (rank 0 prints the table)"
    others = ", ".join(map(str, named))
    return f"{head} because of rank(s) {others} (rank 0 prints the table)"


def print_job(args: argparse.Namespace, verdict: Any, report: Any, strategy: str) -> None:
    """Rank 0's report: the usual header, the job, and one row per (rank, field)."""

    if args.format == "json":
        payload = {
            "manifest": str(args.manifest),
            "digest": report.manifest_digest if report is not None else None,
            **verdict.to_dict(),
        }
        sys.stdout.write(to_json(payload))
        return
    out = sys.stdout
    if report is not None:
        print_header(report)
    out.write(
        f"job:       {len(verdict.prints)} rank(s) on {verdict.nodes} node(s) "
        f"({escape(', '.join(verdict.hosts))}); strategy {escape(strategy)}\n"
    )
    used = {f"--accept {a.finding.field}: no drift on that field" for a in verdict.accepted}
    for line in rank_warnings(verdict.prints):
        if line not in used:  # each rank saw no such row; the job did
            sys.stderr.write(f"warning: {escape(line)}\n")
    if verdict.rows:
        rows = [
            (r.extra["rank"], r.extra["host"], r.field or r.rule, r.expected, r.observed)
            for r in verdict.rows
        ]
        notes = [[("fix", r.hint if r.rule != "distributed.rank-differs" else None)]
                 for r in verdict.rows]  # fmt: skip
        out.write(f"drift:     {len(rows)} row(s) across the ranks\n\n")
        out.write(table(rows, ("rank", "host", "field", "expected", "observed"), notes=notes))
    accepted = (report.accepted if report is not None else []) + verdict.accepted
    for a in accepted:
        out.write(
            f"accepted:  {escape(str(a.finding.field))}: expected "
            f"{escape(str(a.finding.expected))}, observed {escape(str(a.finding.observed))} "
            f"(reason: {escape(a.reason)})\n"
        )
    named = ", ".join(map(str, verdict.named()))
    text = {
        EXIT_OK: f"OK: {len(verdict.prints)} ranks agree with each other and the manifest",
        EXIT_REFUSED: (
            f"REFUSED: rank(s) {named} differ or drifted; fix the rows above, or --accept FIELD"
            if named
            else "REFUSED: the job differs from the manifest; fix the rows above, or --accept FIELD"
        ),
    }.get(verdict.exit_code, f"{_word(verdict.exit_code)}: rank(s) {named} could not verify")
    out.write(f"\n{text}\n" if verdict.rows else f"{text}\n")


def rank_warnings(prints: list[dict[str, Any]]) -> list[str]:
    """Warnings every rank gave once; a warning only some ranks gave, with their ranks."""
    seen: dict[str, list[int]] = {}
    for fp in prints:
        for w in fp.get("warnings") or []:
            seen.setdefault(str(w), []).append(fp["rank"])
        if fp.get("test_override"):
            forced = ", ".join(fp["test_override"])
            seen.setdefault(f"TEST OVERRIDE ACTIVE: forced versions of {forced}", []).append(
                fp["rank"]
            )
    every = len(prints)
    return [
        w if len(r) == every else f"rank(s) {','.join(map(str, r))}: {w}" for w, r in seen.items()
    ]
