"""``ftmanifest signers M``: list who signed a manifest and whether it holds.

Layer: commands - edge.  Lists every signature of ``M.sig.json`` (key id, principals
from the trust file, key status, whether it verifies) and then gives the same verdict as
``verify``'s signature check, with the same exit code: 0 trusted, 1 refused, 2 unusable
input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ftmanifest.cli._args import add_format_argument, add_manifest_argument, trust_help
from ftmanifest.errors import FtManifestError, InputError, InputNotFoundError
from ftmanifest.manifest import load_manifest
from ftmanifest.output import error_text, to_json
from ftmanifest.safe_text import escape
from ftmanifest.signing.verify import inspect_signatures, verify_manifest_signature

DESCRIPTION = """\
List every signature on a manifest's envelope (M.sig.json): key id, the
principals the trust file names for it, the key's status and whether the
signature verifies; then the verdict of verify's signature check for
--threshold distinct trusted keys.  Exit 0 trusted, 1 refused, 2 unusable
input.
"""

EXAMPLES = """\
examples:
  ftmanifest signers exp.yaml
  ftmanifest signers exp.yaml --threshold 2 --trust .ftmanifest/allowed_signers
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "signers",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="list the signatures of a manifest and who made them",
    )
    add_manifest_argument(p, "the manifest file (YAML, JSON or TOML)", kind=str)
    p.add_argument(
        "--trust",
        metavar="PATH",
        help=trust_help(),
    )
    p.add_argument(
        "--threshold",
        type=int,
        default=1,
        metavar="N",
        help="distinct trusted keys required for the verdict (default: 1)",
    )
    add_format_argument(p)
    p.set_defaults(func=run)


def _verifies(value: bool | None) -> str:
    return {True: "yes", False: "NO", None: "unchecked"}[value]


def _check_manifest(manifest: Path) -> None:
    """A missing manifest is "not found" (exit 2), as for every command, not "not signed"."""

    if not manifest.exists():
        raise InputNotFoundError(
            "manifest not found", path=str(manifest), hint="check the path of the manifest"
        )
    if manifest.is_dir():
        raise InputError(
            "manifest is a folder, not a file",
            path=str(manifest),
            hint="name the manifest file (e.g. manifests/exp.yaml)",
        )


def run(args: argparse.Namespace) -> int:

    manifest = Path(args.manifest)
    _check_manifest(manifest)
    trust_arg = Path(args.trust) if args.trust else None
    seen = inspect_signatures(manifest, trust_path=trust_arg)
    trust, checks = seen.trust, seen.checks
    error: FtManifestError | None = None
    report = None
    try:
        loaded = load_manifest(manifest)
        report = verify_manifest_signature(
            manifest, loaded.canonical(), trust_path=trust_arg, threshold=args.threshold
        )
    except FtManifestError as exc:
        error = exc
    if args.format == "json":
        doc: dict[str, Any] = {
            "manifest": str(manifest),
            "envelope": str(seen.envelope_path),
            "trust": str(trust.path) if trust else None,
            "trust_source": seen.source.to_dict() if seen.source else None,
            "warnings": list(trust.warnings) if trust else [],
            "signatures": [
                {
                    "index": c.index,
                    "keyid": c.keyid,
                    "principals": list(c.principals),
                    "status": c.status,
                    "verifies": c.verifies,
                    "detail": c.detail,
                }
                for c in checks
            ],
            "threshold": args.threshold,
            "ok": error is None,
            "error": error.to_dict() if error else None,
        }
        sys.stdout.write(to_json(doc))
    else:
        for warning in trust.warnings if trust else ():
            sys.stderr.write(f"ftmanifest: warning: {escape(warning)}\n")
        if seen.source is not None:
            where = f"{escape(str(seen.source.path))}\n          ({escape(seen.source.describe())})"
        else:
            where = "none found (signatures unchecked)"
        lines = [f"envelope: {escape(str(seen.envelope_path))}", f"trust:    {where}"]
        for c in checks:  # key ids and principals come from untrusted files
            who = escape(",".join(c.principals)) or "-"
            lines.append(
                f"  #{c.index} {escape(c.keyid)}  {who}  {c.status}  "
                f"verifies: {_verifies(c.verifies)}"
            )
        if report is not None:
            lines.append(
                f"verdict: trusted ({len(report.valid_keyids)} distinct trusted key(s), "
                f"threshold {args.threshold})"
            )
        sys.stdout.write("\n".join(lines) + "\n")
        if error is not None:
            sys.stderr.write(f"ftmanifest: refused: {error_text(error)}\n")
    return 0 if error is None else error.exit_code
