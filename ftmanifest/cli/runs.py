"""``ftmanifest runs M``: what happened to an experiment, from its run records.

Layer: commands - edge.  Lists the manifest's records in the experiment ledger (refused,
started, completed, failed, not-started, abandoned, invalid; ``ftmanifest
ledger`` shows every experiment's attempts) with
their time, exit status, command and reason; ``--mark abandoned|invalid
--reason TEXT`` appends one, tied to the manifest's digest.  The manifest
itself, and its signature, stay unchanged: what an experiment *is* is signed,
what *happened* to it is recorded here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.errors import UsageError
from ftmanifest.ledger import runrecord
from ftmanifest.ledger.runrecord import MARKS
from ftmanifest.manifest import load_manifest
from ftmanifest.output import to_json
from ftmanifest.safe_text import escape

DESCRIPTION = """\
What happened to an experiment: the manifest's run records in the ledger
(refused, started, completed, failed, not-started, abandoned, invalid) with
their time, exit status, command and reason.  --mark abandoned|invalid with
--reason TEXT appends one, tied to the manifest's digest; the manifest and
its signature stay unchanged.  Exit 0, 2 unusable input or usage.
"""

EXAMPLES = """\
examples:
  ftmanifest runs exp.yaml
  ftmanifest runs exp.yaml --mark abandoned --reason 'the training data was edited by hand'
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:

    p = sub.add_parser(
        "runs",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="list or add the run records of a manifest",
    )
    add_manifest_argument(p, "manifest file", kind=str)
    p.add_argument(
        "--mark",
        choices=MARKS,
        help="record that the experiment was abandoned or is invalid (needs --reason)",
    )
    p.add_argument("--reason", metavar="TEXT", help="why, for --mark")
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    path = Path(args.manifest)
    if args.reason is not None and args.mark is None:
        raise UsageError(
            "--reason is only for --mark",
            field="--reason",
            hint="add --mark abandoned or --mark invalid",
        )
    if args.mark is not None:
        loaded = load_manifest(path)  # marks only a manifest that loads, with its digest
        runrecord.mark(path, loaded.digest(), args.mark, args.reason or "", loaded=loaded)
    records = runrecord.read(path)
    if args.format == "json":
        sys.stdout.write(to_json({"manifest": str(path), "records": records}))
        return 0
    if not records:
        sys.stdout.write(f"no run records for {escape(str(path))}\n")
        return 0
    for r in records:
        sys.stdout.write(_line(r) + "\n")
    return 0


def _line(r: dict[str, Any]) -> str:
    """``when  status  exit  what``: the command run, the mark's reason, or the source."""
    when = str(r.get("finished_at") or r.get("at") or r.get("started_at") or "-")[:19]
    code = r.get("exit_code")
    if "command" in r:
        what = json.dumps(r["command"])[:60]
    elif "reason" in r:
        what = f"reason: {r['reason']}"
    elif "trainer" in r:
        what = "(the Trainer guard)"
    else:
        what = f"(verify, {len(r.get('accepted', []))} drift(s) accepted)"
    cells = (when, f"{r.get('status', '?'):<11}", "-" if code is None else code, what)
    return "  ".join(escape(str(c)) for c in cells)
