"""``ftmanifest lint M...``: static pinning rules, compiler-style output.

Layer: commands - edge.  Exit 0 clean (warnings only), 1 problems found, 2 a file
unusable (unreadable, malformed, schema-invalid).  Never imports torch;
pydantic only for a variant, judged against its parent (FTM080).
"""

from __future__ import annotations

import argparse

from ftmanifest import lint_paths
from ftmanifest.cli._args import add_format_argument
from ftmanifest.lint_report import lint_report

DESCRIPTION = """\
Check manifests against the static pinning rules (FTM001 model revision is a
commit, FTM002 every model file has a digest, FTM010 packages pinned, FTM030
seeds set, FTM040 data digests and licenses, ...) without reading the model,
the data or the network.  One compiler-style line per problem:
FILE:LINE:COL: RULE message (fix: ...).  Exit 0 clean (warnings only),
1 problems found, 2 a file unusable (unreadable, malformed, schema-invalid).
"""

EXAMPLES = """\
examples:
  ftmanifest lint exp.yaml
  ftmanifest lint manifests/a.yaml manifests/b.yaml --format sarif
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lint",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="check manifests are fully pinned (no I/O beyond reading)",
    )
    p.add_argument(
        "manifests",
        nargs="+",
        metavar="MANIFEST",
        help="manifest files (.yaml, .json, .toml); a folder is refused: pass DIR/*.yaml",
    )
    add_format_argument(p, sarif=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    findings, unusable = lint_paths(args.manifests)
    return lint_report(findings, unusable, len(args.manifests), args.format)
