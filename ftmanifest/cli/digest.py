"""``ftmanifest digest M``: the sha256 of the manifest's canonical (RFC 8785) JSON.

Layer: commands - edge.  Comments, key order and formatting do not change the digest;
any value does.
"""

from __future__ import annotations

import argparse
import sys

from ftmanifest.cli._args import add_format_argument
from ftmanifest.manifest import load_manifest
from ftmanifest.output import to_json

DESCRIPTION = """\
Print the sha256 of each manifest's canonical JSON (RFC 8785), the digest that
signatures and run records name: comments, key order and formatting do not
change it, any value does.  --canonical prints the canonical JSON itself.
Exit 0 printed, 2 an unusable manifest.
"""

EXAMPLES = """\
examples:
  ftmanifest digest exp.yaml
  ftmanifest digest exp.yaml --canonical
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "digest",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="print the digest of a manifest's canonical form",
    )
    p.add_argument("manifests", nargs="+", metavar="MANIFEST", help="manifest files")
    p.add_argument(
        "--canonical",
        action="store_true",
        help="print the canonical JSON itself instead of its digest",
    )
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    results = []
    for path in args.manifests:
        loaded = load_manifest(path)
        if args.canonical:
            sys.stdout.write(loaded.canonical_bytes().decode("utf-8") + "\n")
            continue
        results.append({"path": path, "digest": loaded.digest()})
    if args.canonical:
        return 0
    if args.format == "json":
        sys.stdout.write(to_json({"manifests": results}))
    else:
        for r in results:
            sys.stdout.write(f"{r['digest']}  {r['path']}\n")
    return 0
