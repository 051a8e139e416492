"""``ftmanifest backup check DIR``: verify every backup in a folder.

Layer: commands - edge (parsing and printing; the work is ``ftmanifest.backup.check``,
what opens a backup ``ftmanifest.backup.recipients``).  Registered under
``backup`` by ``cli.NESTED``.  Exit 0 every backup verified (warnings
allowed), 1 a backup refused, 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ftmanifest.backup.check import check_folder, refused
from ftmanifest.backup.recipients import identities_for
from ftmanifest.cli._args import add_format_argument, add_opening_arguments
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED, UsageError
from ftmanifest.output import findings_table, to_json
from ftmanifest.safe_text import escape

DESCRIPTION = """\
Verify every backup in DIR: the signed metadata and index by trusted keys,
the archive's digest, the recipients; with --read-data -i IDENTITY, also
decrypt and check every file, writing nothing.  Exit 0 every backup verified
(warnings allowed), 1 a backup refused, 2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest backup check backups/
  ftmanifest backup check backups/ --read-data -i keys/alice
  ftmanifest backup check backups/ --read-data --archive-passphrase-env BACKUP_PW
"""


def add_parser(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "check",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="verify every backup in a folder",
    )
    p.add_argument("folder", nargs="+", type=Path, metavar="DIR", help="the backups folder")
    p.add_argument(
        "--read-data",
        action="store_true",
        help="decrypt and verify every file (nothing is written)",
    )
    p.add_argument(
        "--archive-passphrase-env",
        metavar="VAR",
        help="--read-data of passphrase backups: the passphrase is in environment variable VAR",
    )
    p.add_argument(
        "--archive-passphrase",
        action="store_true",
        help="--read-data of passphrase backups: ask for the passphrase on the terminal",
    )
    add_opening_arguments(p, "--read-data: ")
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if len(args.folder) != 1:
        raise UsageError(
            "backup check takes one folder",
            field="DIR",
            hint="ftmanifest backup check DIR [--read-data -i IDENTITY]",
        )
    folder = args.folder[0]
    if (
        args.identity or args.archive_passphrase_env or args.archive_passphrase
    ) and not args.read_data:
        raise UsageError("-i and passphrases are for --read-data", field="-i")
    identities = None
    if args.read_data:
        pick = identities_for(
            args.identity,
            passphrase_env=args.archive_passphrase_env,
            ask_passphrase=args.archive_passphrase,
        )

        def identities(meta: Any) -> list[Any]:
            return pick(meta, folder)

    checked, stray = check_folder(folder, trust_path=args.trust, identities=identities)
    bad = [c for c in checked if not c.ok]
    code = EXIT_REFUSED if refused(checked, stray) else EXIT_OK
    if args.format == "json":
        sys.stdout.write(
            to_json(
                {
                    "folder": str(folder),
                    "ok": code == EXIT_OK,
                    "backups": [
                        {
                            "metadata": str(c.meta_path),
                            "backup_id": c.meta.backup_id if c.meta else None,
                            "ok": c.ok,
                            "data_read": c.data_read,
                            "signers": list(c.signers),
                            "findings": [f.to_dict() for f in c.findings],
                        }
                        for c in checked
                    ],
                    "findings": [f.to_dict() for f in stray],
                }
            )
        )
        return code
    out = sys.stdout
    for c in checked:
        name = c.meta.backup_id if c.meta else c.meta_path.name
        if c.ok:
            how = "data verified" if c.data_read else "signature, digests, recipients"
            out.write(f"ok       {escape(name)}  ({how})\n")
        else:
            out.write(f"REFUSED  {escape(name)}\n")
    findings = [f for c in checked for f in c.findings] + stray
    if findings:
        out.write("\n" + findings_table(findings))
    if len(bad) == len(checked):
        out.write(f"no backup verified in {escape(str(folder))}\n")
    out.write(f"\n{len(checked)} backup(s), {len(bad)} refused\n")
    return code
