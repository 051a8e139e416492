"""Command line: one module per subcommand, one error handler.

Layer: edge.  Each subcommand module exposes ``add_parser(subparsers)`` and
``run(args) -> int`` and imports the library lazily inside ``run`` so that
``ftmanifest lint`` never pays for what ``ftmanifest verify`` needs.

Exit codes: 0 ok, 1 a check refused, 2 unusable input or usage, 3 internal
error, 130 interrupted; ``run`` also 126/127 (command not executable / not
found), 128+N (command ended by signal N) or the command's own status.  Set
FTMANIFEST_DEBUG=1 to see tracebacks.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from ftmanifest import __version__
from ftmanifest.errors import EXIT_BUG, EXIT_INPUT, EXIT_INTERRUPTED, FtManifestError

# name -> module under ftmanifest.cli; the one registry of subcommands.
COMMANDS: dict[str, str] = {
    "init": "init",
    "lint": "lint",
    "schema": "schema",
    "digest": "digest",
    "keygen": "keygen",
    "sign": "sign",
    "signers": "signers",
    "scan": "scan",
    "lock": "lock",
    "verify": "verify",
    "run": "run",
}


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors, which matches our convention."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``only``) just the one subcommand being run, so a
    command never pays for importing the others' modules."""
    parser = _Parser(
        prog="ftmanifest",
        description="Signed, declarative manifests for fine-tuning experiments.",
    )
    parser.add_argument("--version", action="version", version=f"ftmanifest {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in COMMANDS.items():
        if only is not None and name != only:
            continue
        mod = importlib.import_module(f"ftmanifest.cli.{module}")
        mod.add_parser(sub)
    return parser


def add_format_argument(parser: argparse.ArgumentParser, *, sarif: bool = False) -> None:
    choices = ["text", "json", "sarif"] if sarif else ["text", "json"]
    parser.add_argument(
        "--format", choices=choices, default="text", help="output format (default: text)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:  # `ftmanifest run M -- CMD ...`: CMD is not ours to parse
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=first if first in COMMANDS else None)
    args = parser.parse_args(argv)
    args.passthrough = passthrough
    debug = os.environ.get("FTMANIFEST_DEBUG", "") not in ("", "0")
    try:
        return int(args.func(args))
    except FtManifestError as exc:
        if debug:
            raise
        if getattr(args, "format", "text") == "json":
            import json

            sys.stdout.write(json.dumps({"error": exc.to_dict()}, indent=2) + "\n")
        else:
            sys.stderr.write(f"ftmanifest: error: {exc.render()}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("ftmanifest: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Output piped into `head` or similar: not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_INPUT
    except Exception as exc:  # pragma: no cover - a bug by definition
        if debug:
            raise
        sys.stderr.write(
            f"ftmanifest: internal error: {type(exc).__name__}: {exc}\n"
            "This is a bug in ftmanifest; rerun with FTMANIFEST_DEBUG=1 for a traceback.\n"
        )
        return EXIT_BUG


def entry() -> None:
    sys.exit(main())
