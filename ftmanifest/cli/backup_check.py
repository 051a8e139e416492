"""``ftmanifest backup check DIR``, and what check and restore share: the
options and the identities that open a backup.

Layer: edge (parsing and printing; the work is ``ftmanifest.backup.check``).
Exit 0 every backup verified (warnings allowed), 1 a backup refused, 2
unusable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ftmanifest.errors import EXIT_OK, EXIT_REFUSED, UsageError
from ftmanifest.safe_text import escape


def add_opening_arguments(p: argparse.ArgumentParser, when: str = "") -> None:
    """-i, --trust (and for restore the passphrase options): what opens and
    judges a backup, shared by ``backup check`` and ``restore``."""
    from ftmanifest.cli import trust_help

    p.add_argument(
        "-i",
        "--identity",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help=f"{when}age identity file or ssh-ed25519 private key (repeatable)",
    )
    p.add_argument(
        "--trust",
        type=Path,
        metavar="PATH",
        help=trust_help("the backup (when creating one: --manifest)"),
    )


def identities_for(args: argparse.Namespace) -> Any:
    """A function giving the identities for one backup: the -i files, or the
    passphrase backup's own key file unlocked with the passphrase."""
    from ftmanifest.backup.keys import load_identities, passphrase_source

    ask = (
        passphrase_source(args.passphrase_env, new=False)
        if args.passphrase_env or (args.passphrase)
        else None
    )
    cached: dict[str, str] = {}

    def secret() -> str:
        if "value" not in cached:
            cached["value"] = (ask or passphrase_source(None, new=False))()
        return cached["value"]

    loaded = [i for path in args.identity for i in load_identities(path, secret)]

    def for_meta(meta: Any, folder: Path | None = None) -> list[Any]:
        if meta.key_file_sha256 and not args.identity:
            key_file = (folder or Path(".")) / meta.key_name
            return load_identities(key_file, secret, sha256=meta.key_file_sha256)
        if not loaded:
            raise UsageError(
                "no identity to decrypt with",
                field="-i",
                hint="pass -i IDENTITY (the private key the backup was "
                "encrypted to), or --passphrase-env VAR for a passphrase backup",
            )
        return loaded

    return for_meta


def run_check(args: argparse.Namespace) -> int:
    from ftmanifest.backup.check import check_folder
    from ftmanifest.output import findings_table, to_json

    if len(args.paths) != 2:
        raise UsageError(
            "backup check takes one folder",
            field="DIR",
            hint="ftmanifest backup check DIR [--read-data -i IDENTITY]",
        )
    folder = args.paths[1]
    if (args.identity or args.passphrase_env or args.passphrase) and not args.read_data:
        raise UsageError("-i and passphrases are for --read-data", field="-i")
    identities = None
    if args.read_data:
        pick = identities_for(args)

        def identities(meta: Any) -> list[Any]:
            return pick(meta, folder)

    checked, stray = check_folder(folder, trust_path=args.trust, identities=identities)
    bad = [c for c in checked if not c.ok]
    if args.format == "json":
        sys.stdout.write(
            to_json(
                {
                    "folder": str(folder),
                    "ok": not bad,
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
        return EXIT_REFUSED if bad else EXIT_OK
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
    if not checked:
        out.write(f"no backups in {escape(str(folder))}\n")
    out.write(f"\n{len(checked)} backup(s), {len(bad)} refused\n")
    return EXIT_REFUSED if bad else EXIT_OK
