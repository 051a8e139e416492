"""What ``verify`` and ``run`` share: verify's options, the one
``verify_manifest`` call they make, its printed report, and the line that says
where accepted drifts were recorded.

Layer: commands (private to ``ftmanifest.cli``: a command module imports this,
never another command module).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.cli._args import (
    add_format_argument,
    add_manifest_argument,
    add_observe_arguments,
    add_trust_arguments,
)
from ftmanifest.cli._render import trusted_line
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED, UsageError
from ftmanifest.ledger.runrecord import record_acceptances as record
from ftmanifest.output import findings_table, note, to_json
from ftmanifest.safe_text import escape
from ftmanifest.verify import verify_manifest

if TYPE_CHECKING:
    from ftmanifest.verify import VerifyReport


def add_verify_arguments(p: argparse.ArgumentParser) -> None:
    """The options of verify, shared with ``ftmanifest run``."""
    add_manifest_argument(p, "the manifest file (YAML, JSON or TOML)")
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


def record_acceptances(report: VerifyReport, status: str, **extra: Any) -> None:
    """``runrecord.record_acceptances``, and the line that says where they went."""

    path = record(report, status, **extra)
    note(f"recorded:  {len(report.accepted)} acceptance(s) in {escape(str(path))}")


def print_header(report: VerifyReport) -> None:
    """The manifest, signature and ledger lines that open a verify report."""
    out = sys.stdout
    out.write(f"manifest:  {escape(str(report.manifest_path))} ({report.manifest_digest})\n")
    if report.signature is not None:
        out.write(f"signature: {trusted_line(report.signature)}\n")
    if report.ledger is not None:
        out.write(f"ledger:    {escape(ledger_line(report.ledger))}\n")


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
