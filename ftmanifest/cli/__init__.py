"""Command line: one module per subcommand, one error handler.

Layer: commands.  Each subcommand module exposes ``add_parser(subparsers)`` and
``run(args) -> int`` and imports the library lazily inside ``run`` so that
``ftmanifest lint`` never pays for what ``ftmanifest verify`` needs.

Exit codes: 0 ok, 1 a check refused, 2 unusable input or usage, 3 internal
error, 130 interrupted, 141 output pipe closed (as if killed by SIGPIPE, the
way ``git`` and coreutils end); ``run`` also 126/127 (command not executable /
not found), 128+N (command ended by signal N) or the command's own status.
Set FTMANIFEST_DEBUG=1 to see tracebacks.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from ftmanifest import __version__
from ftmanifest.errors import EXIT_BUG, EXIT_INTERRUPTED, FtManifestError
from ftmanifest.safe_text import escape

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
    "reproduce": "reproduce",
    "bind": "bind",
    "check-adapter": "check_adapter",
    "run": "run",
    "runs": "runs",
    "ledger": "ledger",
    "unseal": "unseal",
    "preflight": "preflight",
    "plan": "plan",
    "score": "score",
    "compare": "compare",
    "audit": "audit",
    "report": "report",
    "backup": "backup",
    "restore": "restore",
    "prune": "prune",
    "diff": "diff",
    "estimate": "estimate",
    "data": "data",
}

# command -> {subcommand: module}: subcommands that live in a module of their own,
# registered here so that no command module imports another.
NESTED: dict[str, dict[str, str]] = {
    "backup": {"check": "backup_check"},
    "data": {"sample": "data_sample"},
}

# Old spellings still taken, with a note: `backup PATHS...` is `backup create PATHS...`.
OLD_SPELLINGS: dict[str, tuple[str, frozenset[str]]] = {
    "backup": ("create", frozenset({"create", "check", "-h", "--help"})),
}

# Only `run` takes `--` as the start of the command it runs; for every other
# command `--` means what argparse means: the end of the options.
PASSTHROUGH_COMMANDS = frozenset({"run"})

# 128 + SIGPIPE: what a shell reports for a program killed by a closed pipe.
EXIT_BROKEN_PIPE = 141

EPILOG = """\
exit codes:
  0    ok
  1    a check refused (lint problems, drift, scan findings)
  2    unusable input or usage (the message names the file and the fix)
  3    internal error: a bug in ftmanifest (FTMANIFEST_DEBUG=1 shows a traceback)
  130  interrupted (Ctrl-C)
  141  the output pipe was closed (e.g. `| head`)
  `ftmanifest run` also returns 126/127 or the command's own status.

examples:
  ftmanifest init exp.yaml && ftmanifest lock exp.yaml && ftmanifest lint exp.yaml
  ftmanifest run exp.yaml -- python train.py --config cfg.yaml
"""


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows every option's default; keeps the epilog's line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        # no "(default: None/False/[]/'')" noise, and never twice
        default = action.default
        if "%(default)" in text or "default:" in text or default is None or default is False:
            return text
        if isinstance(default, list | str) and not default:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """Every parser of the tool, the subcommands' included (``add_subparsers``
    makes its parsers of this class): no abbreviated options, since an
    abbreviation such as ``--pass`` for ``--passphrase-env`` would let a
    secret typed as an option be taken as a variable name and echoed; the
    defaults shown in ``--help``.  argparse exits 2 on usage errors, which
    matches our convention."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {_shown(extras)}")
        return parsed


def _shown(extras: list[str]) -> str:
    """Unknown arguments as the error shows them: an unknown option's value
    (``--pass SECRET``, ``--pass=SECRET``) is never echoed."""
    out: list[str] = []
    after_option = False
    for token in extras:
        if token.startswith("-") and token != "-":
            name, eq, _ = token.partition("=")
            out.append(f"{name}=..." if eq else name)
            after_option = not eq
        else:
            out.append("..." if after_option else token)
            after_option = False
    return " ".join(out)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``only``) just the one subcommand being run, so a
    command never pays for importing the others' modules."""
    parser = _Parser(
        prog="ftmanifest",
        description="Signed, declarative manifests for fine-tuning experiments.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"ftmanifest {__version__}")
    sub = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        parser_class=_Parser,
        help="what to do (`ftmanifest COMMAND --help` describes each, with examples)",
    )
    sub.required = True
    for name, module in COMMANDS.items():
        if only is not None and name != only:
            continue
        mod = importlib.import_module(f"ftmanifest.cli.{module}")
        mod.add_parser(sub)
    return parser


# Where a trust file is looked for when --trust is not given (signing.locate).
TRUST_DEFAULT = (
    "$FTMANIFEST_TRUST_FILE, else .ftmanifest/allowed_signers at the root of the "
    "repository holding {what}"
)


def trust_help(what: str = "the manifest") -> str:
    """The help of a ``--trust PATH`` found as ``signing.locate`` finds it."""
    return f"allowed signers file (default: {TRUST_DEFAULT.format(what=what)})"


def add_trust_arguments(parser: argparse.ArgumentParser) -> None:
    """``--no-signature``, ``--trust PATH`` and ``--threshold N``, as verify and audit take them."""
    from pathlib import Path

    parser.add_argument(
        "--no-signature",
        action="store_true",
        help="skip the signature check (a warning is printed)",
    )
    parser.add_argument("--trust", type=Path, metavar="PATH", help=trust_help())
    parser.add_argument(
        "--threshold", type=int, default=1, metavar="N", help="distinct trusted signers required"
    )


def add_observe_arguments(parser: argparse.ArgumentParser) -> None:
    """``--code DIR`` and ``--allow-outside``, as verify and reproduce take them."""
    from pathlib import Path

    parser.add_argument(
        "--code",
        type=Path,
        metavar="DIR",
        help="training code folder for the commit check (default: manifest's folder)",
    )
    parser.add_argument(
        "--allow-outside",
        action="store_true",
        help="allow data/model paths outside the manifest's folder",
    )


def add_format_argument(parser: argparse.ArgumentParser, *, sarif: bool = False) -> None:
    choices = ["text", "json", "sarif"] if sarif else ["text", "json"]
    parser.add_argument("--format", choices=choices, default="text", help="output format")


def add_distributed_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--distributed`` (``what`` the ranks do) and ``--rank-timeout`` (issue 18)."""
    parser.add_argument("--distributed", action="store_true", help=f"under torchrun: {what}")
    parser.add_argument(
        "--rank-timeout",
        type=float,
        default=None,
        metavar="S",
        help="with --distributed: seconds to wait for every rank to join and answer (default 300)",
    )


def add_nested(actions: argparse._SubParsersAction, command: str) -> None:
    """Register ``command``'s subcommands that live in their own modules (``NESTED``)."""
    for module in NESTED.get(command, {}).values():
        importlib.import_module(f"ftmanifest.cli.{module}").add_parser(actions)


def add_opening_arguments(parser: argparse.ArgumentParser, when: str = "") -> None:
    """``-i`` and ``--trust``: what opens and judges a backup (``backup check``, ``restore``)."""
    from pathlib import Path

    parser.add_argument(
        "-i",
        "--identity",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help=f"{when}age identity file or ssh-ed25519 private key (repeatable)",
    )
    parser.add_argument("--trust", type=Path, metavar="PATH", help=trust_help("the backup"))


def old_spelling(argv: list[str]) -> list[str]:
    """``backup PATHS...`` (before ``backup create`` existed) as ``backup create PATHS...``,
    with a note on stderr; ``backup check DIR`` and ``backup create check`` are read as
    written, so a folder named ``check`` is backed up with ``backup create check``."""
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if at is None or argv[at] not in OLD_SPELLINGS:
        return argv
    default, known = OLD_SPELLINGS[argv[at]]
    if at + 1 >= len(argv) or argv[at + 1] in known:
        return argv
    sys.stderr.write(
        f"ftmanifest: note: `ftmanifest {argv[at]} PATHS...` is deprecated; "
        f"write `ftmanifest {argv[at]} {default} PATHS...`\n"
    )
    return [*argv[: at + 1], default, *argv[at + 1 :]]


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """``run M -- CMD ...``: CMD is not ours to parse.  Any other command keeps
    its ``--`` for argparse (``lint a.yaml -- -odd-name.yaml``)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first in PASSTHROUGH_COMMANDS and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1 :]
    return argv, []


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _broken_pipe()


def _main(argv: Sequence[str] | None) -> int:
    argv, passthrough = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    argv = old_spelling(argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=first if first in COMMANDS else None)
    args = parser.parse_args(argv)
    args.passthrough = passthrough
    debug = os.environ.get("FTMANIFEST_DEBUG", "") not in ("", "0")
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handler
        return code
    except FtManifestError as exc:
        if debug:
            raise
        if getattr(args, "format", "text") == "json":
            import json

            sys.stdout.write(json.dumps({"error": exc.to_dict()}, indent=2) + "\n")
        else:
            from ftmanifest.output import error_text, terminal_width

            text = error_text(exc, width=terminal_width(sys.stderr))
            sys.stderr.write(f"ftmanifest: error: {text}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("ftmanifest: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except Exception as exc:  # pragma: no cover - a bug by definition
        if debug:
            raise
        sys.stderr.write(
            f"ftmanifest: internal error: {type(exc).__name__}: {escape(str(exc))}\n"
            "This is a bug in ftmanifest; rerun with FTMANIFEST_DEBUG=1 for a traceback.\n"
        )
        return EXIT_BUG


def _broken_pipe() -> int:
    """The reader went away (``| head``): not an error of ours.  Say nothing,
    point stdout at /dev/null so the interpreter's final flush cannot fail
    again, and end as a program killed by SIGPIPE is reported (141), as git
    and coreutils do, so ``set -o pipefail`` still sees it."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


def entry() -> None:
    sys.exit(main())
