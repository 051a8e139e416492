"""``ftmanifest plan M --days 3|7|30``: a rental plan from measured throughput.

Layer: commands - edge.  Reads the newest passing preflight of the manifest's recipe
from the ledger (its sustained tokens/s; ``--tokens-per-second`` instead),
counts the data's tokens with the pinned tokenizer, and prints the method's
phases with their hours (``ftmanifest.preflight.plan``).

Exit codes: 0 the plan fits the rental and the budget, 1 it does not (by how
much is printed), 2 unusable input (no measured throughput: run preflight).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.manifest import load_manifest
from ftmanifest.output import table, to_json
from ftmanifest.preflight.plan import inputs, make_plan
from ftmanifest.safe_text import escape


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


DESCRIPTION = """\
A rental plan from measured throughput: the sustained tokens/s of the newest
passing preflight of the manifest's recipe (or --tokens-per-second), the
data's tokens counted with the pinned tokenizer, and the method's phases with
their hours.  Exit 0 the plan fits the rental and the budget, 1 it does not
(by how much is printed), 2 unusable input (no measured throughput: run
`ftmanifest preflight` first).
"""

EXAMPLES = """\
examples:
  ftmanifest plan exp.yaml --days 3
  ftmanifest plan exp.yaml --days 7 --tokens-per-second 5200
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plan",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="a rental plan in the method's phases, from measured throughput",
    )
    add_manifest_argument(p)
    p.add_argument("--days", type=_positive, required=True, metavar="N",
                   help="length of the rental in days (3, 7, 30...)")  # fmt: skip
    p.add_argument("--tokens-per-second", type=_positive, metavar="X",
                   help="sustained training tokens/s (default: the last preflight's)")  # fmt: skip
    p.add_argument("--ledger", type=Path, metavar="DIR", help="the ledger folder")
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    loaded = load_manifest(args.manifest)
    figures = inputs(loaded, tokens_per_second=args.tokens_per_second, ledger=args.ledger)
    plan = make_plan(loaded.manifest, args.days, figures)
    if args.format == "json":
        sys.stdout.write(to_json(plan.to_dict()))
        return 0 if plan.ok else 1
    rental = args.days * 24
    rows = [
        (name, f"{hours:.2f}", f"{hours / rental:.1%}", how) for name, hours, how in plan.phases
    ]
    rows.append(("total", f"{plan.total:.2f}", f"{plan.total / rental:.1%}", ""))
    sys.stdout.write(table(rows, ("phase", "hours", "of rental", "from"), nowrap=(0, 1, 2)))
    for why in plan.refusals:
        sys.stdout.write(f"REFUSED: {escape(why)}\n")
    if plan.ok:
        sys.stdout.write(f"fits: {plan.total:.2f} h of the {args.days:g}-day rental "
                         f"({rental - plan.total:.2f} h to spare)\n")  # fmt: skip
    return 0 if plan.ok else 1
