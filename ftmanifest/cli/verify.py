"""``ftmanifest verify M``: refuse when this machine, the model, the data or the
signature drifted from the manifest.

Layer: edge.  Exit 0 clean, 1 drift (one row per difference), 2 an unusable
manifest or usage.  ``--distributed`` (under torchrun) verifies every rank
and compares the ranks (``ftmanifest.distributed.verify``): rank 0 prints the
report with a per-rank table on stdout; every other rank prints one line on
stderr (so the job's stdout stays one report, and one JSON document with
``--format json``); all ranks exit with the same code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.cli._args import (
    add_distributed_arguments,
    add_format_argument,
    add_observe_arguments,
    add_trust_arguments,
)
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED, UsageError
from ftmanifest.safe_text import escape

if TYPE_CHECKING:
    from ftmanifest.verify import VerifyReport


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

    add_arguments(p)
    add_distributed_arguments(p, "verify every rank and refuse when ranks differ (rank 0 reports)")
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of verify, shared with ``ftmanifest run``."""
    p.add_argument(
        "manifest", type=Path, metavar="MANIFEST", help="the manifest file (YAML, JSON or TOML)"
    )
    p.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="FIELD",
        help="accept the drift on FIELD on purpose (needs a --reason each)",
    )
    p.add_argument(
        "--reason",
        action="append",
        default=[],
        metavar="TEXT",
        help="why the matching --accept is fine; printed in the report",
    )
    add_trust_arguments(p)
    p.add_argument("--no-cache", action="store_true", help="rehash every file")
    p.add_argument(
        "--no-scan",
        action="store_true",
        help="skip the data scan that the manifest's security policy asks for",
    )
    add_observe_arguments(p)
    p.add_argument(
        "--ledger",
        type=Path,
        metavar="DIR",
        help="the ledger folder (default: $FTMANIFEST_LEDGER, else .ftmanifest/ledger "
        "at the repository's root)",
    )
    add_format_argument(p)


def accepted_fields(args: argparse.Namespace) -> dict[str, str]:
    if len(args.accept) != len(args.reason):
        raise UsageError(
            "every --accept needs its own --reason",
            field="--reason",
            expected=f"{len(args.accept)} reason(s)",
            observed=f"{len(args.reason)} reason(s)",
            hint="ftmanifest verify M --accept FIELD --reason 'why this is fine'",
        )
    return dict(zip(args.accept, args.reason, strict=True))


def run(args: argparse.Namespace) -> int:
    warn_test_override()
    if getattr(args, "distributed", False):
        return run_distributed(args)
    from ftmanifest.distributed.shard import no_rank_timeout

    no_rank_timeout(args.rank_timeout, "verify M")
    report, code = report_and_print(args)
    if report.accepted:
        record_acceptances(report, "verified" if report.ok else "refused", ledger=args.ledger)
    return code


def warn_test_override() -> None:
    """Loud, on every run: a test-only package override is in force here."""
    from ftmanifest.probe.packages import TEST_VERSIONS, forced_versions

    forced = forced_versions()
    if forced:
        sys.stderr.write(
            f"warning: TEST OVERRIDE ACTIVE ({TEST_VERSIONS}, FTMANIFEST_TESTING=1): "
            f"{escape(', '.join(sorted(forced)))} reported with forced versions that match "
            "no pin; this verify does not judge what is installed\n"
        )


def record_acceptances(report: VerifyReport, status: str, **extra: Any) -> None:
    """``runrecord.record_acceptances``, and the line that says where they went."""
    from ftmanifest.ledger.runrecord import record_acceptances as record

    path = record(report, status, **extra)
    sys.stderr.write(f"recorded:  {len(report.accepted)} acceptance(s) in {escape(str(path))}\n")


def print_header(report: VerifyReport) -> None:
    """The manifest, signature and ledger lines that open a verify report."""
    out = sys.stdout
    out.write(f"manifest:  {escape(str(report.manifest_path))} ({report.manifest_digest})\n")
    if report.signature is not None:
        out.write(f"signature: {trusted_line(report.signature)}\n")
    if report.ledger is not None:
        out.write(f"ledger:    {escape(ledger_line(report.ledger))}\n")


def trusted_line(sig: Any) -> str:
    """``trusted (1 key(s): alice@example.org; threshold 1)`` for a signature report."""
    names = sorted({escape(p) for s in sig.signatures if s.status == "valid" for p in s.principals})
    return (
        f"trusted ({len(sig.valid_keyids)} key(s): {', '.join(names)}; threshold {sig.threshold})"
    )


def ledger_line(history: dict[str, Any]) -> str:
    """``3 attempt(s): 1 abandoned, 2 completed; sealed test: 1 use(s)``."""
    counts = ", ".join(f"{n} {s}" for s, n in sorted(history["by_status"].items()))
    text = f"{history['attempts']} attempt(s)" + (f": {counts}" if counts else "")
    for split, use in history["sealed"].items():
        text += f"; sealed {split}: {use['family_uses']} use(s) by the family"
    if history["over_budget"]:
        text += f"; {len(history['over_budget'])} over budget"
    return text


def verify_only(args: argparse.Namespace, hasher: Any = None) -> VerifyReport:
    """The verify this process runs (every rank runs it under --distributed, with
    the job's ``hasher``)."""
    from ftmanifest.verify import verify_manifest

    return verify_manifest(
        args.manifest,
        signature=not args.no_signature,
        trust_path=args.trust,
        threshold=args.threshold,
        accept=accepted_fields(args),
        use_cache=not args.no_cache,
        code_dir=args.code,
        allow_outside=args.allow_outside,
        scan=not args.no_scan,
        ledger=getattr(args, "ledger", None),
        hasher=hasher,
    )


def report_and_print(args: argparse.Namespace) -> tuple[VerifyReport, int]:
    from ftmanifest.output import findings_table, to_json

    report = verify_only(args)
    if args.format == "json":
        sys.stdout.write(to_json(report.to_dict()))
        return report, EXIT_OK if report.ok else EXIT_REFUSED
    out = sys.stdout
    print_header(report)
    for warning in report.warnings:
        sys.stderr.write(f"warning: {escape(warning)}\n")
    if report.findings:
        out.write(f"drift:     {len(report.findings)} difference(s)\n\n")
        out.write(findings_table(report.findings))
    for a in report.accepted:
        out.write(
            f"accepted:  {escape(str(a.finding.field))}: expected "
            f"{escape(str(a.finding.expected))}, observed {escape(str(a.finding.observed))} "
            f"(reason: {escape(a.reason)})\n"
        )
    verdict = "OK: no drift" if report.ok else "REFUSED: fix the rows above, or --accept FIELD"
    if report.ok and report.findings:
        verdict = "OK: warnings only"
    out.write(f"\n{verdict}\n" if report.findings else f"{verdict}\n")
    return report, EXIT_OK if report.ok else EXIT_REFUSED


def run_distributed(args: argparse.Namespace) -> int:
    """``verify --distributed``: join the job, agree on the manifest, verify, judge."""
    from ftmanifest.distributed.comm import joined
    from ftmanifest.distributed.fingerprint import strategy_from_env
    from ftmanifest.distributed.shard import launched
    from ftmanifest.distributed.verify import verify_job

    job, timeout = launched(args.rank_timeout, f"verify {args.manifest}")
    accept = accepted_fields(args)
    strategy = strategy_from_env(job.world_size)
    with joined(job, timeout) as comm:
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
        sys.stderr.write(rank_line(job.rank, verdict) + "\n")
        return verdict.exit_code
    print_job(args, verdict, report, strategy)
    if report is not None and (report.accepted or verdict.accepted):
        report.findings = list(verdict.rows)  # the record keeps the job's verdict
        report.accepted += verdict.accepted
        record_acceptances(report, "verified" if verdict.ok else "refused", ledger=args.ledger)
    return verdict.exit_code


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
    from ftmanifest.output import table, to_json

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
