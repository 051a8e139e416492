"""``ftmanifest sign M [--key K]``: sign a manifest into ``M.sig.json``.

Layer: commands - edge.  Signing again with another key adds a signature to the same
envelope (author, then reviewer); ``--replace`` starts a new envelope.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.manifest import load_manifest
from ftmanifest.output import to_json
from ftmanifest.safe_text import escape
from ftmanifest.signing.errors import KeyNotFoundError
from ftmanifest.signing.keys import load_private_key
from ftmanifest.signing.locate import DEFAULT_KEY
from ftmanifest.signing.passphrase import for_unlock
from ftmanifest.signing.sign import sign_manifest

DESCRIPTION = """\
Sign a manifest's canonical form with an Ed25519 key into a DSSE envelope
beside it (M.sig.json), with --key or else the key `ftmanifest keygen`
writes by default (~/.ftmanifest/id_ed25519).  Signing again with another
key adds a signature to the same envelope (author, then reviewer); --replace
starts a new envelope, dropping signatures made over an older version of the
manifest.  Exit 0
signed (or already signed by this key), 2 unusable input (no key, a wrong
passphrase, an unreadable manifest).
"""

EXAMPLES = """\
examples:
  ftmanifest sign exp.yaml
  ftmanifest sign exp.yaml --key keys/alice
  ftmanifest sign exp.yaml --key keys/bob --passphrase-env BOB_KEY_PASSPHRASE
  ftmanifest sign exp.yaml --key keys/alice --replace
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sign",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="sign a manifest (DSSE envelope beside it)",
    )
    add_manifest_argument(p, "the manifest file (YAML, JSON or TOML)", kind=str)
    p.add_argument(
        "--key",
        metavar="PATH",
        help=f"Ed25519 private key (OpenSSH) (default: {DEFAULT_KEY}, made by `ftmanifest keygen`)",
    )
    p.add_argument(
        "--passphrase-env",
        metavar="VAR",
        help="read the key's passphrase from environment variable VAR (else asked if needed)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="start a new envelope, dropping signatures over an older version",
    )
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    loaded = load_manifest(args.manifest)
    key_path = Path(args.key or DEFAULT_KEY).expanduser()
    if args.key is None and not key_path.exists() and not key_path.is_symlink():
        raise KeyNotFoundError(
            "no --key given and keygen's default key does not exist",
            path=str(key_path),
            field="--key",
            expected=f"a private key at {DEFAULT_KEY}, or --key PATH",
            observed="no such file",
            hint="create it with `ftmanifest keygen --comment EMAIL --trust`, or pass --key PATH",
        )
    key = load_private_key(key_path, for_unlock(args.passphrase_env, str(key_path)))
    result = sign_manifest(Path(args.manifest), loaded.canonical(), key, replace=args.replace)
    if args.format == "json":
        sys.stdout.write(
            to_json(
                {
                    "manifest": args.manifest,
                    "envelope": str(result.envelope_path),
                    "keyid": result.keyid,
                    "status": result.status,
                    "signatures": result.signatures,
                }
            )
        )
    else:
        verb = {
            "created": "signed",
            "appended": "added a signature to",
            "replaced": "replaced the envelope of",
            "already-signed": "already signed (unchanged):",
        }[result.status]
        sys.stdout.write(
            f"{verb} {escape(str(args.manifest))} with {escape(result.keyid)}\n"
            f"  envelope: {escape(str(result.envelope_path))} "
            f"({result.signatures} signature(s))\n"
        )
    return 0
