"""``ftmanifest audit RUN_DIR --manifest M``: the handoff gate.

Layer: commands - edge.  Exit 0 ready for handoff, 1 any error row (signature, drift,
deliverable, scan, undeclared personal data, permissions, rights, comparison),
2 an unusable manifest, run folder or usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.cli._args import add_format_argument, add_trust_arguments
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED
from ftmanifest.manifest import load_manifest
from ftmanifest.output import findings_table, to_json
from ftmanifest.results.audit import audit
from ftmanifest.results.handoff import report_data
from ftmanifest.results.report import write_report
from ftmanifest.safe_text import escape

DESCRIPTION = """\
The handoff gate for a run folder: the manifest's signature, drift, the
deliverable, a scan for secrets and undeclared personal data, file
permissions, data rights and the saved comparison, one row each, and a
handoff report (JSON, Markdown, HTML).  Exit 0 ready for handoff, 1 any
error row, 2 an unusable manifest, run folder or usage.
"""

EXAMPLES = """\
examples:
  ftmanifest audit out/ --manifest exp.yaml
  ftmanifest audit out/ --manifest exp.yaml --fix-perms --limits 'evaluated on English only'
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "audit",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="check a run folder before handoff: signature, deliverable, scan, "
        "permissions, rights, comparison",
    )
    p.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN_DIR",
        help="the run's folder: logs/, checkpoints/, data/, keys/, the export",
    )
    p.add_argument(
        "--manifest",
        type=Path,
        required=True,
        metavar="M",
        help="the run's manifest file (YAML, JSON or TOML)",
    )
    p.add_argument(
        "--fix-perms",
        action="store_true",
        help="tighten group/world-accessible files and folders to security.max_modes "
        "(never loosens, never follows symlinks) and list each change",
    )
    add_trust_arguments(p)
    p.add_argument("--no-cache", action="store_true", help="rehash and rescan every file")
    p.add_argument(
        "--allow-outside",
        action="store_true",
        help="allow data/model paths outside the manifest's folder",
    )
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="DIR",
        help="folder to write the handoff report into (handoff.json, .md, .html; default "
        "RUN_DIR/handoff)",
    )
    p.add_argument(
        "--limits", metavar="TEXT", help="the observed limits to state in the report (free text)"
    )
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = audit(
        args.run_dir,
        args.manifest,
        signature=not args.no_signature,
        trust_path=args.trust,
        threshold=args.threshold,
        fix_perms=args.fix_perms,
        use_cache=not args.no_cache,
        allow_outside=args.allow_outside,
    )
    code = EXIT_OK if report.ok else EXIT_REFUSED
    body = report.to_dict()
    data = report_data(body, load_manifest(args.manifest).manifest, args.limits)
    paths = write_report(data, args.out or args.run_dir / "handoff", mode=0o600)
    if args.format == "json":
        sys.stdout.write(to_json({**body, "report": data, "report_files": paths.to_dict()}))
        return code
    out = sys.stdout
    v = report.subject.verify
    out.write(f"manifest:  {escape(str(args.manifest))} ({v.manifest_digest})\n")
    out.write(f"run:       {escape(str(args.run_dir))}\n")
    if v.signature is not None:
        names = sorted(
            {escape(p) for s in v.signature.signatures if s.status == "valid" for p in s.principals}
        )
        out.write(f"signature: trusted ({', '.join(names)}; threshold {v.signature.threshold})\n")
    for warning in v.warnings:
        sys.stderr.write(f"warning: {escape(warning)}\n")
    for c in report.perm_changes:
        out.write(f"chmod:     {escape(str(c.path))} {c.old:04o} -> {c.new:04o}\n")
    if report.findings:
        out.write(f"audit:     {len(report.findings)} row(s)\n\n")
        out.write(findings_table(report.findings))
        out.write("\n")
    out.write(f"report:    {escape(str(paths.html))} (and .md, .json beside it)\n")
    errors = sum(f.severity == "error" for f in report.findings)
    out.write(
        "OK: ready for handoff\n"
        if report.ok
        else f"REFUSED: {errors} problem(s) block handoff; fix the rows above\n"
    )
    return code
