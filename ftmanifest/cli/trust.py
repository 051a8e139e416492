"""``ftmanifest trust add KEY.pub --principal EMAIL``: trust a signer's key.

Layer: commands - edge.  Parses, calls ``signing.trust_add.add_trusted_key`` and prints
the line it wrote; the checks (a real Ed25519 public key, a principal ssh
reads as one name, no duplicate, a trust file only its owner can change)
live there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.cli._args import add_format_argument
from ftmanifest.output import to_json
from ftmanifest.safe_text import escape
from ftmanifest.signing.trust_add import add_trusted_key, repository_trust_file

DESCRIPTION = """\
Manage the repository's trust file, .ftmanifest/allowed_signers at the root
of the git work tree holding the current folder (outside a repository: in
the current folder), which verify, signers and reproduce read.
"""

ADD_DESCRIPTION = """\
Add an Ed25519 or ECDSA P-256 public key (KEY.pub, as made by `ftmanifest
keygen` or `ssh-keygen -t ed25519`, or a PEM public key such as a model
publisher's PUB.pem) to the trust file for PRINCIPAL, with the options
verify requires (namespaces="ftmanifest").  A PEM X.509 CA certificate
(CA.pem, basicConstraints CA:TRUE) is trusted for certificate-signed
model.sig instead: its key is written as a cert-authority line for
x509-ca@ftmanifest and the certificate beside the trust file, in
x509-ca/.  The folder is created 0755 and
the file written whole (temp file, fsync, rename), mode 0644.  Refused: a
malformed key or one of another kind, a private key, a principal with spaces,
commas or quotes, a key the file already trusts, an existing trust file
that does not parse, a trust file or folder other users could change.
Exit 0 added, 1 the trust file or a folder above it is writable by others,
2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest trust add ~/.ftmanifest/id_ed25519.pub --principal alice@example.org
  ftmanifest trust add keys/bob.pub --principal bob@example.org
  ftmanifest trust add publisher.pem --principal models@example.org
  ftmanifest trust add publisher-ca.pem --principal models@example.org
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trust",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="add a signer's public key to the repository's trust file",
    )
    actions = p.add_subparsers(
        dest="action", metavar="ACTION", parser_class=type(p), help="what to do"
    )
    actions.required = True
    q = actions.add_parser(
        "add",
        description=ADD_DESCRIPTION,
        epilog=EXAMPLES,
        help="trust a public key for a principal",
    )
    q.add_argument("key", metavar="KEY.pub", help="the signer's OpenSSH public key file")
    q.add_argument(
        "--principal",
        required=True,
        metavar="EMAIL",
        help="who signs with this key (the name verify and signers show)",
    )
    q.add_argument(
        "--trust",
        metavar="PATH",
        help="write this allowed_signers file instead of the repository's",
    )
    add_format_argument(q)
    q.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.trust:
        trust = Path(args.trust)
        stop = trust.parent if str(trust.parent) else Path(".")
    else:
        trust, stop = repository_trust_file(Path.cwd())
    added = add_trusted_key(trust, Path(args.key), args.principal, stop)
    if args.format == "json":
        sys.stdout.write(
            to_json(
                {
                    "trust": str(added.path),
                    "principal": added.principal,
                    "keyid": added.fingerprint,
                    "line": added.line,
                    "created": added.created,
                }
            )
        )
    else:
        verb = "created" if added.created else "added to"
        sys.stdout.write(
            f"{verb} {escape(str(added.path))}: {escape(added.principal)} {added.fingerprint}\n"
        )
    return 0
