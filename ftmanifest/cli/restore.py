"""``ftmanifest restore BACKUP -i IDENTITY --out DEST``.

Layer: commands - edge (parsing and printing; the work is
``ftmanifest.backup.restore``).  BACKUP is the ``<id>.age`` archive or its
``<id>.meta.json``.  Exit 0 restored, 1 refused (nothing is written to DEST), 2 unusable
input.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ftmanifest.backup.meta import meta_path_of, read_meta, trust_for
from ftmanifest.backup.recipients import identities_for
from ftmanifest.backup.restore import restore
from ftmanifest.cli._args import add_format_argument, add_opening_arguments
from ftmanifest.errors import EXIT_OK, InputNotFoundError, UsageError
from ftmanifest.output import to_json
from ftmanifest.progress import Progress
from ftmanifest.safe_text import escape

DESCRIPTION = """\
Verify a backup (its signed metadata, by a trusted key; every file's digest)
and restore it into a new folder DEST.  BACKUP is the <id>.age archive or
its <id>.meta.json.  Nothing is written to DEST unless every check passes.
Exit 0 restored, 1 refused, 2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest restore backups/run-20250301T120000Z-3f9a1c2b7d4e.age -i keys/alice --out restored/
  ftmanifest restore backups/data-20250301T120000Z-9b8c7d6e5f4a.age --archive-passphrase -o new/
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "restore",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="verify and restore a backup into a new folder",
    )
    p.add_argument("backup", type=Path, metavar="BACKUP", help="<id>.age or <id>.meta.json")
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="DEST",
        help="folder to write the files into, created (never overwritten without --force); "
        "required",
    )
    p.add_argument(
        "--archive-passphrase-env",
        metavar="VAR",
        help="passphrase backups: the passphrase is in environment variable VAR",
    )
    p.add_argument(
        "--archive-passphrase",
        action="store_true",
        help="passphrase backups: ask for the passphrase on the terminal",
    )
    p.add_argument("--force", action="store_true", help="replace DEST if it exists")
    add_opening_arguments(p)
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.out is None:  # required, and checked here so that the old --to counts too
        raise UsageError(
            "--out DEST is required",
            field="--out",
            hint="ftmanifest restore BACKUP -i IDENTITY --out DEST",
        )
    if not os.path.lexists(args.backup):
        raise InputNotFoundError(
            "backup not found",
            path=str(args.backup),
            hint="pass the <id>.age or <id>.meta.json file",
        )
    meta_path = meta_path_of(args.backup)
    trust = trust_for(meta_path, args.trust)
    meta, signers = read_meta(meta_path, trust=trust)
    opening = identities_for(
        args.identity,
        passphrase_env=args.archive_passphrase_env,
        ask_passphrase=args.archive_passphrase,
    )
    identities = opening(meta, meta_path.parent)

    with Progress(label="restore") as progress:
        done = restore(
            meta_path.parent / meta.archive_name,
            meta,
            identities,
            args.out,
            trust=trust,
            force=args.force,
            progress=progress,
        )
    if args.format == "json":
        sys.stdout.write(
            to_json(
                {
                    "backup_id": meta.backup_id,
                    "restored": str(done.dest),
                    "replaced": done.replaced,
                    "files": sum(1 for e in done.read.entries if e.type == "file"),
                    "metadata_signers": list(signers),
                    "index_signers": list(done.read.signers),
                }
            )
        )
        return EXIT_OK
    files = sum(1 for e in done.read.entries if e.type == "file")
    sys.stdout.write(
        f"restored:  {meta.backup_id} -> {escape(str(done.dest))}"
        f"{' (replaced)' if done.replaced else ''}\n"
        f"verified:  metadata and index signed by {', '.join(done.read.signers)}; "
        f"{files} file(s), every sha256 matches what the backup signed\n"
    )
    return EXIT_OK
