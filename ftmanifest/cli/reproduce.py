"""``ftmanifest reproduce M``: what it takes to rerun a signed manifest here.

Layer: commands - edge.  Exit 0 when nothing differs (reproducible here), 1 when
anything does (one section per group of rows, the requirements file and the
commands to close the gaps), 1 or 2 for a refused signature, as ``verify``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.cli._args import (
    add_format_argument,
    add_manifest_argument,
    add_observe_arguments,
    add_trust_arguments,
)
from ftmanifest.cli._render import trusted_line
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED
from ftmanifest.output import table, to_json
from ftmanifest.safe_text import escape
from ftmanifest.verify.reproduce import GROUPS, build_plan

HEADER = ("field", "expected", "observed")


DESCRIPTION = """\
What it takes to rerun a signed manifest here: checks the signature, compares
this machine, model and data with the manifest, writes the exact package pins
to a requirements file, and lists the commands that close each gap.  Exit 0
nothing differs (reproducible here), 1 something does, 1 or 2 for a refused
signature (as for verify), 2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest reproduce exp.yaml
  ftmanifest reproduce exp.yaml --requirements requirements-exp.txt
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "reproduce",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="check a signed manifest against this machine; write pins, list what to do",
    )
    add_manifest_argument(p, "the manifest file (YAML, JSON or TOML)")
    p.add_argument(
        "--requirements",
        type=Path,
        metavar="PATH",
        help="where to write the exact pins (default: ftmanifest's cache, "
        "reproduce/<manifest stem>-<digest>.requirements.txt, outside the work tree)",
    )
    add_trust_arguments(p)
    add_observe_arguments(p)
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    plan = build_plan(
        args.manifest,
        requirements=args.requirements,
        signature=not args.no_signature,
        trust_path=args.trust,
        threshold=args.threshold,
        code_dir=args.code,
        allow_outside=args.allow_outside,
    )
    code = EXIT_OK if plan.reproducible else EXIT_REFUSED
    for warning in plan.warnings:
        sys.stderr.write(f"warning: {escape(warning)}\n")
    if args.format == "json":
        sys.stdout.write(to_json(plan.to_dict()))
        return code
    out = sys.stdout
    out.write(f"manifest:     {escape(str(plan.manifest_path))} ({plan.manifest_digest})\n")
    if plan.signature is not None:
        out.write(f"signature:    {trusted_line(plan.signature)}\n")
    else:
        out.write("signature:    NOT checked\n")
    for group in GROUPS:
        rows = plan.groups.get(group) or []
        if not rows:
            continue
        title = group
        if group == "model":
            title += " (snapshot missing here)" if plan.model_missing else " (snapshot present)"
        out.write(f"\n{title}: {len(rows)} difference(s)\n")
        out.write(table([(r.field, r.expected, r.observed) for r in rows], HEADER))
    pins = f"{len(plan.pins)} exact pin(s)"
    if plan.unpinned:
        pins += f", {len(plan.unpinned)} not pinned exactly: {', '.join(plan.unpinned)}"
    out.write(f"\nrequirements: {escape(str(plan.requirements_path))} ({escape(pins)})\n")
    if plan.commands:
        out.write("commands:\n")
        for command in plan.commands:
            out.write(f"  {escape(command)}\n")
    for note in plan.notes:
        out.write(f"note: {escape(note)}\n")
    total = sum(len(rows) for rows in plan.groups.values())
    verdict = (
        "REPRODUCIBLE here: nothing differs"
        if plan.reproducible
        else f"NOT reproducible here as is: {total} difference(s); run the commands above"
    )
    out.write(f"\n{verdict}\n")
    return code
