"""``ftmanifest unseal M --split NAME --reason TEXT``: one recorded use of the sealed split.

Layer: commands - edge.  Checks that NAME is a sealed data entry whose file is the
pinned data, records the use (with the reason) in the ledger, and prints the path to
evaluate on stdout alone, so ``EVAL=$(ftmanifest unseal ...)`` works; the use count of
the experiment's family goes to stderr, with a warning from the second use.
``ftmanifest score`` on the split then consumes this use.

Exit codes: 0 recorded, 1 the split is not the pinned data, 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.ledger.sealed import unseal
from ftmanifest.manifest import load_manifest
from ftmanifest.output import note, to_json
from ftmanifest.safe_text import escape

DESCRIPTION = """\
Record one use of the sealed test split and print its path, alone on stdout,
so EVAL=$(ftmanifest unseal ...) works.  NAME must be a sealed data entry
whose file is the pinned data; the use (with the reason) goes into the
ledger, and the family's use count to stderr, with a warning from the
second use.  `ftmanifest score` on the split consumes this use.  Exit 0
recorded, 1 the split is not the pinned data, 2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest unseal exp.yaml --split test --reason 'the final number'
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "unseal",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="record one use of the sealed test split, print its path",
    )
    add_manifest_argument(p)
    p.add_argument("--split", required=True, metavar="NAME", help="the sealed data entry")
    p.add_argument("--reason", required=True, metavar="TEXT", help="why this evaluation")
    p.add_argument("--ledger", type=Path, metavar="DIR", help="the ledger folder")
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    use = unseal(load_manifest(args.manifest), args.split, args.reason, ledger=args.ledger)
    if args.format == "json":
        sys.stdout.write(to_json(use))
    else:
        sys.stdout.write(use["path"] + "\n")
    n = use["family_uses"]
    note(
        f"unsealed: split {escape(args.split)}, use {use['use']} recorded in "
        f"{escape(use['ledger'])}; use {n} by this experiment's family"
    )
    if n >= 2:
        sys.stderr.write(
            f"warning: sealed split {escape(args.split)} used {n} times by this family: "
            "choosing settings on the test split again and again destroys its value\n"
        )
    return 0
