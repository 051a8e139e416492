"""``ftmanifest check-adapter ADAPTER``: refuse an adapter on any base but its own.

Layer: commands - edge (parsing and printing; the judging is
``ftmanifest.adapter.check``).  Reads safetensors headers, configs and digests only:
torch is never imported.  Exit 0 the adapter fits the base and its binding is trusted
(warnings allowed), 1 refused (one row per reason), 2 unusable input or usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ftmanifest.adapter.check import check_adapter
from ftmanifest.cli._args import add_format_argument, trust_help
from ftmanifest.cli._render import adapter_table
from ftmanifest.errors import EXIT_OK, EXIT_REFUSED, UsageError
from ftmanifest.output import to_json
from ftmanifest.safe_text import escape

if TYPE_CHECKING:
    pass


DESCRIPTION = """\
Refuse an adapter on any base but its own: verify the adapter's signed
binding (written by `ftmanifest bind`) by a trusted key, and check that it
fits the base named by --manifest, --base or --base-repo (the hub cache's
snapshot, at --revision).  Reads safetensors headers, configs and digests
only.  Exit 0 the adapter fits and its binding is trusted (warnings allowed),
1 refused (one row per reason), 2 unusable input or usage.
"""

EXAMPLES = """\
examples:
  ftmanifest check-adapter out/adapter --manifest exp.yaml
  ftmanifest check-adapter out/adapter --base models/other-base
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check-adapter",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="check an adapter's signed binding against a base model",
    )
    p.add_argument("adapter", type=Path, metavar="ADAPTER_DIR", help="the peft adapter folder")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--manifest", type=Path, metavar="MANIFEST",
                       help="check against the manifest's base and method")  # fmt: skip
    which.add_argument("--base", type=Path, metavar="DIR", help="check against this base folder")
    which.add_argument(
        "--base-repo", metavar="ID", help="check against this hub repo's cached snapshot"
    )
    p.add_argument("--revision", metavar="SHA", help="the commit of --base-repo")
    p.add_argument("--trust", type=Path, metavar="PATH",
                   help=trust_help("--manifest, else the adapter"))  # fmt: skip
    p.add_argument("--no-cache", action="store_true", help="rehash every file")
    p.add_argument("--allow-outside", action="store_true",
                   help="allow a model path outside the manifest's "
                        "repository (or folder)")  # fmt: skip
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.revision and not args.base_repo:
        raise UsageError(
            "--revision goes with --base-repo",
            field="--revision",
            hint="ftmanifest check-adapter A --base-repo ID --revision SHA",
        )
    report = check_adapter(
        args.adapter,
        manifest=args.manifest,
        base_dir=args.base,
        base_repo=args.base_repo,
        revision=args.revision,
        trust_path=args.trust,
        use_cache=not args.no_cache,
        allow_outside=args.allow_outside,
    )
    code = EXIT_OK if report.ok else EXIT_REFUSED
    if args.format == "json":
        sys.stdout.write(to_json(report.to_dict()))
        return code
    out = sys.stdout
    out.write(f"adapter:   {escape(str(report.adapter_dir))}\n")
    b = report.binding
    if b is not None:
        who = ", ".join(escape(s) for s in report.signers)
        out.write(f"binding:   {escape(str(report.envelope_path))} (signed by {who})\n")
        bound = f"{b.base_repo}@{b.base_revision}" if b.base_repo else "a local base"
        out.write(f"bound to:  {escape(bound)} {b.base_tensor_digest}\n")
    out.write(f"base:      {escape(str(report.base_folder))}"
              + (f" {report.tensor_digest}" if report.tensor_digest else "") + "\n")  # fmt: skip
    if report.findings:
        out.write("\n" + adapter_table(report.findings) + "\n")
    if not report.ok:
        out.write("REFUSED: do not load this adapter on this base (rows above)\n")
    elif report.findings:
        out.write("OK: bound to this base (warnings only)\n")
    else:
        out.write("OK: bound to this base\n")
    return code
