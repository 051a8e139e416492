"""``ftmanifest report AUDIT.json --out DIR``: the handoff report from a saved audit.

Layer: commands - edge.  Renders ``handoff.json``, ``handoff.md`` and a self-contained
``handoff.html`` and the model card ``README.md`` with
``ftmanifest.results.report``; prints where they are and opens nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.cli._args import add_format_argument
from ftmanifest.output import to_json
from ftmanifest.results.report import load_report_data, write_report
from ftmanifest.safe_text import escape

DESCRIPTION = """\
Render a saved audit (what `ftmanifest audit --format json` printed, or the
handoff.json it wrote) as handoff.json, handoff.md, one self-contained
handoff.html (no network, no scripts) and README.md, a Hugging Face model card
(YAML front matter the Hub reads), and print where they are.  The card holds no
path of this machine; a value in it that the scan takes for a secret or
personal data is masked and counted.  Exit 0 written, 1 the card still held
a flagged value after masking, 2 an unusable audit file or folder.
"""

EXAMPLES = """\
examples:
  ftmanifest report audit.json --out handoff/
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="write the handoff report (JSON, Markdown, HTML, model card) from a saved audit",
    )
    p.add_argument("audit", metavar="AUDIT.json", help="the JSON that `ftmanifest audit` wrote")
    p.add_argument(
        "-o",
        "--out",
        metavar="DIR",
        required=True,
        help="folder to write handoff.{json,md,html} and README.md into (created if missing)",
    )
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    paths = write_report(load_report_data(args.audit), Path(args.out))
    if args.format == "json":
        sys.stdout.write(to_json({**paths.to_dict(), "redacted": paths.redacted}))
    else:
        for path in (paths.json, paths.markdown, paths.html, paths.model_card):
            sys.stdout.write(f"wrote {escape(str(path))}\n")
    if paths.redacted:
        sys.stderr.write(
            f"warning: {paths.redacted} value(s) in the model card looked like personal data "
            "and were masked; remove them from the manifest or the audit\n"
        )
    return 0
