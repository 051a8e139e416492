"""``ftmanifest backup create PATHS... --out DIR`` (and ``backup check DIR``, in
``backup_check``).

Layer: commands - edge (parsing and printing; who may decrypt is
``ftmanifest.backup.recipients``, the work ``ftmanifest.backup.create``).
Exit 0 written, 1 refused (a file changed while read, a link or device among
the paths), 2 unusable input.  The old spelling ``backup PATHS...`` still
creates, with a note on stderr (``cli.old_spelling``); a folder named
``check`` is backed up with ``backup create check``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.backup.create import create_backup
from ftmanifest.backup.keys import passphrase_source
from ftmanifest.backup.recipients import recipients_for
from ftmanifest.cli import add_nested
from ftmanifest.cli._args import add_format_argument, trust_help
from ftmanifest.errors import EXIT_OK, UsageError
from ftmanifest.manifest import load_manifest
from ftmanifest.output import to_json
from ftmanifest.progress import Progress, format_bytes
from ftmanifest.safe_text import escape
from ftmanifest.signing.keys import load_private_key
from ftmanifest.signing.passphrase import for_unlock

DESCRIPTION = """\
Encrypted, signed backups (age).  backup create PATH... --out DIR: files ->
tar -> age, encrypted to the recipients (-r, -R, else the signed manifest's)
or a passphrase, with an index and metadata signed by --key.  backup check
DIR: verify every backup in DIR.
"""

EXAMPLES = """\
examples:
  ftmanifest backup create out/ --out backups/ --kind run --manifest exp.yaml --key keys/alice
  ftmanifest backup check backups/ --read-data -i keys/alice
"""

CREATE_DESCRIPTION = """\
Back up files and folders: files -> tar -> age, encrypted to the recipients
(-r, -R, else the signed manifest's security.backup_recipients) or a
passphrase, with an index and metadata signed by --key.  Exit 0 written,
1 refused (a file changed while read, a link or device among the paths),
2 unusable input.
"""

CREATE_EXAMPLES = """\
examples:
  ftmanifest backup create out/ --out backups/ --kind run --manifest exp.yaml --key keys/alice
  ftmanifest backup create data/ --out backups/ --kind data --key keys/alice -R team.pub --tag v1
  ftmanifest backup create check --out backups/ --key keys/alice -R team.pub
"""


def add_parser(sub: argparse._SubParsersAction) -> None:

    p = sub.add_parser(
        "backup",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="encrypted, signed backups (age): `backup create`, `backup check`",
    )
    actions = p.add_subparsers(
        dest="action", metavar="ACTION", parser_class=type(p), help="create or check backups"
    )
    actions.required = True
    _add_create(actions)
    add_nested(actions, "backup")


def _add_create(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "create",
        description=CREATE_DESCRIPTION,
        epilog=CREATE_EXAMPLES,
        help="back up files and folders, encrypted and signed",
    )
    p.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="files and folders to back up"
    )
    p.add_argument("-o", "--out", type=Path, metavar="DIR", help="folder to write the backup into")
    p.add_argument(
        "-r",
        "--recipient",
        action="append",
        default=[],
        metavar="KEY",
        help="age1... or 'ssh-ed25519 AAAA...' public key (repeatable)",
    )
    p.add_argument(
        "-R",
        "--recipients-file",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help="file of public keys (age recipients, .pub, allowed_signers)",
    )
    p.add_argument(
        "--archive-passphrase-env",
        metavar="VAR",
        help="encrypt with the passphrase in environment variable VAR (scrypt)",
    )
    p.add_argument(
        "--archive-passphrase",
        action="store_true",
        help="encrypt with a passphrase asked on the terminal",
    )
    p.add_argument(
        "--kind",
        default="run",
        choices=["data", "checkpoint", "logs", "adapter", "run"],
        help="what it holds",
    )
    p.add_argument(
        "--manifest",
        type=Path,
        metavar="MANIFEST",
        help="the experiment's manifest: id, digest, default recipients",
    )
    p.add_argument("--tag", action="append", default=[], metavar="TEXT", help="a tag (repeatable)")
    p.add_argument(
        "--key",
        type=Path,
        metavar="PATH",
        help="Ed25519 private key that signs the index and metadata",
    )
    p.add_argument(
        "--key-passphrase-env",
        metavar="VAR",
        help="the signing key's passphrase, from environment variable VAR",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="no effect, kept for older scripts: a backup reads every file once, while "
        "it is archived, and takes no digest from the stat cache",
    )
    p.add_argument("--trust", type=Path, metavar="PATH", help=trust_help("--manifest"))
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.out is None:
        raise UsageError(
            "--out DIR is required",
            field="--out",
            hint="ftmanifest backup create PATHS... --out DIR --key K -r RECIPIENT",
        )
    if args.key is None:
        raise UsageError(
            "--key is required: the index and metadata are signed",
            field="--key",
            hint="make one with `ftmanifest keygen -f PATH`",
        )
    loaded = load_manifest(args.manifest) if args.manifest else None
    use_passphrase = bool(args.archive_passphrase or args.archive_passphrase_env)
    recipients, skipped = recipients_for(
        args.recipient,
        args.recipients_file,
        manifest=loaded,
        trust_path=args.trust,
        passphrase=use_passphrase,
    )
    for line in skipped:
        sys.stderr.write(f"warning: not a recipient: {escape(line)}\n")
    if use_passphrase and recipients:
        raise UsageError(
            "a passphrase and recipients do not go together",
            field="--archive-passphrase-env",
            hint="encrypt to recipients (-r) or with a passphrase, not both",
        )
    if not use_passphrase and not recipients:
        raise UsageError(
            "no recipient to encrypt to",
            field="-r",
            expected="-r KEY, -R FILE, --archive-passphrase-env VAR, or security.backup_recipients "
            "in --manifest",
            hint="age-keygen -o key.txt makes a key; its age1... line is the recipient",
        )
    key_path = Path(args.key).expanduser()
    key = load_private_key(key_path, for_unlock(args.key_passphrase_env, str(key_path)))
    secret = passphrase_source(args.archive_passphrase_env, new=True)() if use_passphrase else None
    with Progress(label="backup") as progress:
        created = create_backup(
            args.paths,
            args.out,
            key=key,
            recipients=recipients,
            passphrase=secret,
            kind=args.kind,
            experiment_id=loaded.manifest.experiment.id if loaded else None,
            manifest_digest=loaded.digest() if loaded else None,
            tags=args.tag,
            progress=progress,
        )
    meta = created.meta
    if args.format == "json":
        sys.stdout.write(
            to_json(
                {
                    "backup_id": meta.backup_id,
                    "archive": str(created.archive),
                    "metadata": str(created.meta_path),
                    "key_file": str(created.key_path) if created.key_path else None,
                    "predicate": meta.predicate(),
                }
            )
        )
        return EXIT_OK
    out = sys.stdout
    out.write(f"backup:    {meta.backup_id} ({meta.kind})\n")
    out.write(f"files:     {meta.files} ({format_bytes(meta.bytes)})\n")
    out.write(
        f"archive:   {escape(str(created.archive))} ({format_bytes(meta.archive_size)}, "
        f"sha256:{meta.archive_sha256[:16]}...)\n"
    )
    for r in meta.recipients:
        out.write(f"recipient: {r['type']} {escape(r['fingerprint'])}\n")
    if created.key_path:
        out.write(
            f"key file:  {escape(str(created.key_path))} (passphrase-encrypted identity; "
            "keep it beside the archive)\n"
        )
    out.write(f"metadata:  {escape(str(created.meta_path))} (signed)\n")
    return EXIT_OK
