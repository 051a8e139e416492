"""``ftmanifest backup PATHS... --to DIR`` and ``ftmanifest backup check DIR``.

Layer: edge (parsing and printing; the work is ``ftmanifest.backup``).
backup: exit 0 written, 1 refused (a file changed while read, a link or
device among the paths), 2 unusable input.  check: exit 0 every backup
verified (warnings allowed), 1 a backup refused, 2 unusable input.
(A file literally named ``check`` is backed up as ``./check``.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ftmanifest.errors import EXIT_OK, UsageError
from ftmanifest.safe_text import escape

DESCRIPTION = """\
backup PATH... --to DIR: files -> tar -> age, encrypted to the recipients
(-r, -R, else the signed manifest's) or a passphrase, with an index and
metadata signed by --key.
backup check DIR: verify every backup in DIR (signatures by trusted keys;
with --read-data -i IDENTITY, decrypt and check every file, writing nothing).
Exit 0 written / every backup verified (warnings allowed), 1 refused (a file
changed while read, a link or device among the paths; a backup that does not
verify), 2 unusable input.  A file named check is backed up as ./check.
"""

EXAMPLES = """\
examples:
  ftmanifest backup out/ --to backups/ --kind run --manifest exp.yaml --key keys/alice
  ftmanifest backup data/ --to backups/ --kind data --key keys/alice -R team.pub --tag v1
  ftmanifest backup check backups/ --read-data -i keys/alice
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ftmanifest.cli import add_format_argument

    p = sub.add_parser(
        "backup",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="encrypted, signed backups (age); `backup check DIR` verifies them",
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="files and folders to back up (or: check DIR)",
    )
    p.add_argument("--to", type=Path, metavar="DIR", help="folder the backup is written into")
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
        "--passphrase-env",
        metavar="VAR",
        help="encrypt with the passphrase in environment variable VAR (scrypt)",
    )
    p.add_argument(
        "--passphrase", action="store_true", help="encrypt with a passphrase asked on the terminal"
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
    p.add_argument("--no-cache", action="store_true", help="rehash every file")
    p.add_argument(
        "--read-data",
        action="store_true",
        help="check: decrypt and verify every file (nothing is written)",
    )
    from ftmanifest.cli.backup_check import add_opening_arguments

    add_opening_arguments(p, "check --read-data: ")
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if str(args.paths[0]) == "check":
        from ftmanifest.cli.backup_check import run_check

        _refuse_options(
            args,
            ["--to", "--recipient", "--recipients-file", "--manifest", "--key", "--tag"],
            "backup check",
        )
        return run_check(args)
    return _create(args)


def _refuse_options(args: argparse.Namespace, names: list[str], what: str) -> None:
    for name in names:
        value = getattr(args, name.lstrip("-").replace("-", "_"))
        if value not in (None, False, []):
            raise UsageError(f"{name} does not go with {what}", field=name)


def _recipients(args: argparse.Namespace, manifest: Any) -> list[Any]:
    from ftmanifest.backup.keys import parse_recipient, read_recipients_file, unique

    out = [parse_recipient(r, source="-r") for r in args.recipient]
    for path in args.recipients_file:
        out += read_recipients_file(path)
    if not out and manifest is not None and not (args.passphrase or args.passphrase_env):
        # Recipients decide who can read the backup: take them only from a
        # manifest whose signature a trusted key made (an edited manifest
        # could name an outsider's key).
        from ftmanifest.signing.verify import verify_manifest_signature

        verify_manifest_signature(manifest.path, manifest.canonical(), trust_path=args.trust)
        out = [
            parse_recipient(r, source="security.backup_recipients")
            for r in manifest.manifest.security.backup_recipients
        ]
    return unique(out)


def _create(args: argparse.Namespace) -> int:
    from ftmanifest.backup.create import create_backup
    from ftmanifest.backup.keys import passphrase_source
    from ftmanifest.manifest import load_manifest
    from ftmanifest.progress import Progress, format_bytes
    from ftmanifest.signing.keys import load_private_key
    from ftmanifest.signing.passphrase import for_unlock

    _refuse_options(args, ["--read-data", "--identity"], "creating a backup")
    if args.to is None:
        raise UsageError(
            "--to DIR is required",
            field="--to",
            hint="ftmanifest backup PATHS... --to DIR --key K -r RECIPIENT",
        )
    if args.key is None:
        raise UsageError(
            "--key is required: the index and metadata are signed",
            field="--key",
            hint="make one with `ftmanifest keygen -f PATH`",
        )
    loaded = load_manifest(args.manifest) if args.manifest else None
    recipients = _recipients(args, loaded)
    use_passphrase = bool(args.passphrase or args.passphrase_env)
    if use_passphrase and recipients:
        raise UsageError(
            "a passphrase and recipients do not go together",
            field="--passphrase-env",
            hint="encrypt to recipients (-r) or with a passphrase, not both",
        )
    if not use_passphrase and not recipients:
        raise UsageError(
            "no recipient to encrypt to",
            field="-r",
            expected="-r KEY, -R FILE, --passphrase-env VAR, or security.backup_recipients "
            "in --manifest",
            hint="age-keygen -o key.txt makes a key; its age1... line is the recipient",
        )
    key_path = Path(args.key).expanduser()
    key = load_private_key(key_path, for_unlock(args.key_passphrase_env, str(key_path)))
    secret = passphrase_source(args.passphrase_env, new=True)() if use_passphrase else None
    with Progress(label="backup") as progress:
        created = create_backup(
            args.paths,
            args.to,
            key=key,
            recipients=recipients,
            passphrase=secret,
            kind=args.kind,
            experiment_id=loaded.manifest.experiment.id if loaded else None,
            manifest_digest=loaded.digest() if loaded else None,
            tags=args.tag,
            use_cache=not args.no_cache,
            progress=progress,
        )
    meta = created.meta
    if args.format == "json":
        from ftmanifest.output import to_json

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
