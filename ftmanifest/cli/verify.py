"""``ftmanifest verify M``: refuse when this machine, the model, the data or the
signature drifted from the manifest.

Layer: edge.  Exit 0 clean, 1 drift (one row per difference), 2 an unusable
manifest or usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.errors import EXIT_OK, EXIT_REFUSED, UsageError
from ftmanifest.safe_text import escape

if TYPE_CHECKING:
    from ftmanifest.verify import VerifyReport


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify", help="compare a manifest with this machine, model, data, signature"
    )
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of verify, shared with ``ftmanifest run``."""
    from ftmanifest.cli import add_format_argument, add_observe_arguments, add_trust_arguments

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
    report, code = report_and_print(args)
    if report.accepted:
        record_acceptances(report, "verified" if report.ok else "refused", ledger=args.ledger)
    return code


def record_acceptances(report: VerifyReport, status: str, **extra: Any) -> None:
    """Append the report to the manifest's run records; an acceptance is never unrecorded."""
    from ftmanifest import runrecord
    from ftmanifest.errors import InputError

    ledger = extra.pop("ledger", None)
    try:
        path = runrecord.append(
            report.manifest_path,
            runrecord.build(report, status=status, ledger=ledger, **extra),
            ledger=ledger,
        )
    except OSError as exc:
        raise InputError(
            "cannot record the accepted drift",
            path=str(runrecord.records_path(report.manifest_path, ledger)),
            expected="a writable ledger folder (.ftmanifest/ledger or --ledger DIR)",
            observed=exc.strerror or str(exc),
            hint="make the manifest's folder writable, or fix the drift instead of accepting it",
        ) from None
    sys.stderr.write(f"recorded:  {len(report.accepted)} acceptance(s) in {escape(str(path))}\n")


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


def report_and_print(args: argparse.Namespace) -> tuple[VerifyReport, int]:
    from ftmanifest.output import findings_table, to_json
    from ftmanifest.verify import verify_manifest

    report = verify_manifest(
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
    )
    if args.format == "json":
        sys.stdout.write(to_json(report.to_dict()))
        return report, EXIT_OK if report.ok else EXIT_REFUSED
    out = sys.stdout
    out.write(f"manifest:  {escape(str(report.manifest_path))} ({report.manifest_digest})\n")
    if report.signature is not None:
        out.write(f"signature: {trusted_line(report.signature)}\n")
    if report.ledger is not None:
        out.write(f"ledger:    {escape(ledger_line(report.ledger))}\n")
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
