"""``ftmanifest diff A B``: what changed from manifest A to manifest B.

Layer: commands - edge (parsing and printing; the comparison is
``ftmanifest.manifest.diff``).  Exit 0 the manifests say the same, 1 they
differ (as diff(1)), 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ftmanifest.cli._args import add_format_argument
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.diff import diff_manifests, shown_value
from ftmanifest.output import to_json
from ftmanifest.safe_text import escape

_WIDTH = 48


DESCRIPTION = """\
What changed from manifest A to manifest B, field by field (a variant against
its parent, or two versions of one experiment).  Exit 0 the manifests say the
same, 1 they differ (as diff(1)), 2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest diff manifests/docroute-lora-r16.yaml manifests/docroute-lora-r32.yaml
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="field-by-field difference of two manifests",
    )
    p.add_argument("old", type=Path, metavar="A", help="the parent (or older) manifest")
    p.add_argument("new", type=Path, metavar="B", help="the variant (or newer) manifest")
    add_format_argument(p)
    p.set_defaults(func=run)


def _shown(value: Any, kind: str, side: str) -> str:
    absent = (kind == "added" and side == "old") or (kind == "removed" and side == "new")
    return escape(shown_value(value, absent=absent, width=_WIDTH))


def run(args: argparse.Namespace) -> int:

    old, new = load_manifest(args.old), load_manifest(args.new)
    changes = diff_manifests(old, new)
    code = EXIT_REFUSED if changes else EXIT_OK
    if args.format == "json":
        sys.stdout.write(to_json({
            "old": str(args.old), "new": str(args.new), "identical": not changes,
            "changes": [c.to_dict() for c in changes],
        }))  # fmt: skip
        return code
    out = sys.stdout
    if not changes:
        out.write("the manifests say the same (formatting and comments aside)\n")
        return code
    rows = [(escape(c.field), _shown(c.old, c.kind, "old"), _shown(c.new, c.kind, "new"))
            for c in changes]  # fmt: skip
    widths = [max(len(r[i]) for r in rows + [("field", "A", "B")]) for i in range(2)]
    out.write(f"{'field'.ljust(widths[0])}  {'A'.ljust(widths[1])}  B\n")
    for field, a, b in rows:
        out.write(f"{field.ljust(widths[0])}  {a.ljust(widths[1])}  {b}\n")
    out.write(f"\n{len(changes)} field(s) differ\n")
    return code
