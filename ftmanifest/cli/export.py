"""``ftmanifest export M --format cyclonedx``: the manifest as a CycloneDX ML-BOM.

Layer: commands - edge.  ``results.export`` reads and builds; this prints the BOM or
writes it atomically to ``--out``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.fsutil import atomic_write_text
from ftmanifest.results.export import FORMATS, export_manifest
from ftmanifest.safe_text import escape

DESCRIPTION = """\
Write a manifest as a CycloneDX 1.6 ML-BOM (JSON): the fine-tuned model with
its model card, the base model with its pinned revision and SHA-256 file
hashes, the data sets with their licences and hashes, and the Python packages
of the lock file as pkg:pypi components.  With --audit, the audit's per-category
results, stated limits and delivered files go in too.  The same manifest (and
audit) gives the same bytes.  A value the scan takes for a secret or personal
data is masked.  Exit 0 written, 1 the manifest does not pass lint or the lock
file or audit is not the manifest's, 2 an unusable manifest, audit or lock file
or an unknown format.
"""

EXAMPLES = """\
examples:
  ftmanifest export exp.yaml --format cyclonedx
  ftmanifest export exp.yaml --format cyclonedx --audit audit.json --out handoff/bom.cdx.json
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="write the manifest as a CycloneDX ML-BOM",
    )
    p.add_argument("manifest", metavar="MANIFEST", help="the manifest to export")
    p.add_argument(
        "--format", choices=FORMATS, required=True, help="output format: cyclonedx (1.6 JSON)"
    )
    p.add_argument(
        "--audit",
        type=Path,
        metavar="AUDIT.json",
        help="the JSON `ftmanifest audit` wrote for this manifest (adds results and files)",
    )
    p.add_argument(
        "-o", "--out", type=Path, metavar="FILE", help="write here (atomically) instead of stdout"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    exported = export_manifest(args.manifest, fmt=args.format, audit=args.audit)
    if exported.redacted:
        sys.stderr.write(
            f"warning: {exported.redacted} value(s) looked like a secret or personal data "
            "and were masked; remove them from the manifest or the audit\n"
        )
    if args.out is None:
        sys.stdout.write(exported.text)
        return 0
    atomic_write_text(args.out, exported.text, make_parents=True)
    sys.stdout.write(f"wrote {escape(str(args.out))}\n")
    return 0
