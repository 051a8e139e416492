"""``ftmanifest schema``: print (or write) the JSON Schema generated from the model.

Layer: commands - edge.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.fsutil import atomic_write_text
from ftmanifest.manifest.schema import generate, markdown_reference, render
from ftmanifest.output import note

DESCRIPTION = """\
Print the manifest's JSON Schema, generated from the data model (the one
source of truth for every field), or write it to each --out PATH.
--markdown prints the field reference table instead.  Exit 0 printed or
written, 2 a path that cannot be written.
"""

EXAMPLES = """\
examples:
  ftmanifest schema
  ftmanifest schema --out schema/manifest.schema.json
  ftmanifest schema --markdown
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "schema",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="print the manifest JSON Schema generated from the model",
    )
    p.add_argument(
        "--markdown",
        action="store_true",
        help="print the field reference table (as in docs/reference/manifest.md) instead",
    )
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="write the schema to PATH instead of printing (repeatable)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    text = markdown_reference(generate()) if args.markdown else render(generate())
    if not args.out:
        sys.stdout.write(text)
    for path in args.out:
        atomic_write_text(path, text)
        note(f"wrote {path}")
    return 0
