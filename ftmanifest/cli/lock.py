"""``ftmanifest lock M``: pin the manifest to this machine, model and data, in place.

Layer: edge.  Comments are kept (YAML); ``--dry-run`` prints the diff instead
of writing.  Exit 0 written (or nothing to change), 1 with --dry-run and
--check when the file would change, 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("lock", help="fill in or refresh a manifest's pins from this machine")
    p.add_argument(
        "manifest", type=Path, metavar="MANIFEST", help="the YAML or JSON manifest to rewrite"
    )
    p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    p.add_argument(
        "--check",
        action="store_true",
        help="with --dry-run: exit 1 when the manifest is not up to date",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="rehash every file (ignore the digest cache)"
    )
    p.add_argument(
        "--code",
        type=Path,
        metavar="DIR",
        help="training code folder for the commit (default: the manifest's folder)",
    )
    p.add_argument(
        "--allow-outside",
        action="store_true",
        help="allow data/model paths outside the manifest's folder",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftmanifest.lock import lock_manifest

    result = lock_manifest(
        args.manifest,
        dry_run=args.dry_run,
        use_cache=not args.no_cache,
        code_dir=args.code,
        allow_outside=args.allow_outside,
    )
    for note in result.notes:
        sys.stderr.write(f"note: {note}\n")
    if args.dry_run:
        sys.stdout.write(result.diff() or f"{args.manifest}: already locked, nothing to change\n")
        return 1 if (args.check and result.changed) else 0
    if result.changed:
        added = sum(
            1
            for line in result.diff().splitlines()
            if line.startswith("+") and not line.startswith("+++")
        )
        sys.stderr.write(
            f"locked {args.manifest} ({added} line(s) changed); "
            f"sign it again: ftmanifest sign {args.manifest} --key KEY\n"
        )
    else:
        sys.stderr.write(f"{args.manifest}: already locked, nothing to change\n")
    return 0
