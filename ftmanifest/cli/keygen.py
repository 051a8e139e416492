"""``ftmanifest keygen``: write a signing key pair (Ed25519, or ECDSA P-256).

Layer: commands - edge.  The private key is created 0600; the public key line and the
matching allowed-signers line are printed so the key can be trusted, or with
``--add-trust`` added to the repository's trust file (``signing.trust_add``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.cli._args import add_format_argument
from ftmanifest.errors import UsageError
from ftmanifest.output import to_json
from ftmanifest.signing.keys import generate_key_pair
from ftmanifest.signing.locate import DEFAULT_KEY
from ftmanifest.signing.passphrase import for_new_key
from ftmanifest.signing.trust_add import add_trusted_key, check_principal, repository_trust_file

DESCRIPTION = """\
Write an Ed25519 signing key pair in OpenSSH format: the private key at PATH
(created 0600, encrypted with a passphrase asked on the terminal unless
--passphrase-env or --no-passphrase), the public key at PATH.pub.  With
--type ecdsa-p256 the pair is ECDSA P-256, the curve OpenSSF model-signing
signs with: the private key is PKCS#8 PEM (what `model_signing sign key`
reads), the public key is written as an OpenSSH line at PATH.pub and as PEM
at PATH.pub.pem (what `model_signing verify key --public_key` reads); `bind`
with such a key also writes the adapter's model.sig.  The
public key line and the matching allowed_signers line are printed: add that
line to .ftmanifest/allowed_signers to trust the key, or pass --add-trust to add
it to the repository's trust file for the principal given by --comment (as
`ftmanifest trust add PATH.pub --principal EMAIL` does).  `ftmanifest sign`
uses the default PATH when --key is not given.  Exit 0 written, 1 the trust
file's folder is writable by others, 2 unusable input (the key file exists,
a passphrase cannot be read, --add-trust without --comment).  --format json
prints the paths, fingerprint and allowed_signers line as one object.
"""

EXAMPLES = """\
examples:
  ftmanifest keygen --comment alice@example.org --add-trust
  ftmanifest keygen -f keys/alice --comment alice@example.org
  ftmanifest keygen -f keys/ci --no-passphrase --comment ci@example.org --format json
  ftmanifest keygen -f keys/release --type ecdsa-p256 --comment release@example.org
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "keygen",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="create a signing key pair (Ed25519, or ECDSA P-256 for model-signing)",
    )
    p.add_argument(
        "-f",
        dest="path",
        default=str(DEFAULT_KEY),
        metavar="PATH",
        help=f"private key file; the public key goes to PATH.pub (default: {DEFAULT_KEY})",
    )
    p.add_argument(
        "--type",
        dest="key_type",
        choices=("ed25519", "ecdsa-p256"),
        default="ed25519",
        help="key type (default: ed25519); ecdsa-p256 also writes PATH.pub.pem and lets "
        "`bind` write an OpenSSF model-signing model.sig",
    )
    p.add_argument("--comment", default="", help="comment stored in PATH.pub (e.g. your email)")
    p.add_argument(
        "--add-trust",
        action="store_true",
        help="add the public key to the repository's .ftmanifest/allowed_signers "
        "for the principal given by --comment",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--passphrase-env",
        metavar="VAR",
        help="encrypt the key with the passphrase held in environment variable VAR",
    )
    group.add_argument("--no-passphrase", action="store_true", help="leave the key unencrypted")
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    path = Path(args.path).expanduser()
    if args.add_trust and not args.comment:
        raise UsageError(
            "--add-trust needs the principal to trust the key for",
            field="--comment",
            expected="the signer's e-mail address",
            observed="no --comment",
            hint="ftmanifest keygen --comment alice@example.org --add-trust",
        )
    if args.add_trust:  # refuse a bad principal before a key is written
        check_principal(args.comment)
    passphrase = for_new_key(args.passphrase_env, args.no_passphrase)
    fp = generate_key_pair(path, comment=args.comment, passphrase=passphrase, kind=args.key_type)
    pub = path.with_name(path.name + ".pub")
    pem = pub.with_name(pub.name + ".pem") if args.key_type == "ecdsa-p256" else None
    key_line = " ".join(pub.read_text(encoding="utf-8").split()[:2])
    principal = args.comment or "PRINCIPAL"
    signers_line = f'{principal} namespaces="ftmanifest" {key_line}'
    added = None
    if args.add_trust:
        trust, stop = repository_trust_file(Path.cwd())
        added = add_trusted_key(trust, pub, args.comment, stop)
    if args.format == "json":
        sys.stdout.write(
            to_json(
                {
                    "private_key": str(path),
                    "public_key": str(pub),
                    "public_key_pem": str(pem) if pem else None,
                    "type": args.key_type,
                    "encrypted": bool(passphrase),
                    "fingerprint": fp,
                    "allowed_signers_line": signers_line,
                    "trust_file": str(added.path) if added else None,
                    "principal": added.principal if added else (args.comment or None),
                }
            )
        )
        return 0
    sys.stdout.write(
        f"private key: {path} ({'encrypted' if passphrase else 'not encrypted'})\n"
        f"public key:  {pub}\n" + (f"public PEM:  {pem}\n" if pem else "") + f"fingerprint: {fp}\n"
    )
    if added is not None:
        sys.stdout.write(f"added to {added.path} for {added.principal}\n")
    else:
        sys.stdout.write(
            "to trust it, add this line to .ftmanifest/allowed_signers "
            "(or run `ftmanifest trust add`):\n"
            f"  {signers_line}\n"
        )
    return 0
