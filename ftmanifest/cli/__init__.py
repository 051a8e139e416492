"""Command line: one module per subcommand, one error handler.

Layer: commands.  Each subcommand module exposes ``add_parser(subparsers)`` and
``run(args) -> int``, with its imports at module top: only the command being
run is imported (``build_parser(only=...)``), so ``ftmanifest lint`` never pays
for what ``ftmanifest verify`` needs, and ``--help``, ``--version`` or a missing
or unknown command word import none (``SUMMARIES``).  No
command module imports another: what several share lives in the private
``_args`` (the parser class, common options), ``_render`` (common renderings)
and ``_verify_report`` (what ``verify`` and ``run`` both print).

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
import shlex
import sys
from collections.abc import Sequence
from typing import NoReturn

from ftmanifest import __version__
from ftmanifest.cli._args import (
    Parser,
    add_old_options,
    add_quiet_everywhere,
    deprecated_note,
    require_manifest,
    shown_extras,
)
from ftmanifest.collector import tune_collector
from ftmanifest.errors import EXIT_BUG, EXIT_INTERRUPTED, FtManifestError, ResourceError
from ftmanifest.extras import missing_extra
from ftmanifest.output import error_text, terminal_width
from ftmanifest.progress import quieted
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
    "trust": "trust",
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
    "export": "export",
    "backup": "backup",
    "restore": "restore",
    "prune": "prune",
    "diff": "diff",
    "estimate": "estimate",
    "data": "data",
}

# name -> the one-line summary its module's add_parser gives (`help=`): what the
# top-level help lists without importing any command module.  A test builds both
# and compares, so this table cannot go stale.
SUMMARIES: dict[str, str] = {
    "init": "write a commented manifest template to fill in",
    "lint": "check manifests are fully pinned (no I/O beyond reading)",
    "schema": "print the manifest JSON Schema generated from the model",
    "digest": "print the digest of a manifest's canonical form",
    "keygen": "create a signing key pair (Ed25519, or ECDSA P-256 for model-signing)",
    "sign": "sign a manifest (DSSE envelope beside it)",
    "signers": "list the signatures of a manifest and who made them",
    "trust": "add a signer's public key to the repository's trust file",
    "scan": "scan data and artifacts for secrets, PII, pickles",
    "lock": "fill in or refresh a manifest's pins from this machine",
    "verify": "compare a manifest with this machine, model, data, signature",
    "reproduce": "check a signed manifest against this machine; write pins, list what to do",
    "bind": "bind a trained adapter to the manifest's base model (signed)",
    "check-adapter": "check an adapter's signed binding against a base model",
    "run": "verify a manifest, then run the training command",
    "runs": "list or add the run records of a manifest",
    "ledger": "list, show, check or mark the attempts in the ledger",
    "unseal": "record one use of the sealed test split, print its path",
    "preflight": "check and size one full training step on this machine",
    "plan": "a rental plan in the method's phases, from measured throughput",
    "score": "score predictions into a results file bound to its inputs",
    "compare": "check a candidate's results against the manifest's guards",
    "audit": "check a run folder before handoff: signature, deliverable, scan, permissions, "
    "rights, comparison",
    "report": "write the handoff report (JSON, Markdown, HTML, model card) from a saved audit",
    "export": "write the manifest as a CycloneDX ML-BOM",
    "backup": "encrypted, signed backups (age): `backup create`, `backup check`",
    "restore": "verify and restore a backup into a new folder",
    "prune": "delete backups the retention policy does not keep",
    "diff": "field-by-field difference of two manifests",
    "estimate": "memory of one training step, from the model's config",
    "data": "check the manifest's data splits for leakage, or look at a sample",
}

# command -> {subcommand: module}: subcommands that live in a module of their own,
# registered here so that no command module imports another.
NESTED: dict[str, dict[str, str]] = {
    "backup": {"check": "backup_check"},
    "data": {"sample": "data_sample"},
}

# Old spellings still taken, with a note: `backup PATHS...` is `backup create PATHS...`.
OLD_SPELLINGS: dict[str, tuple[str, frozenset[str]]] = {
    "backup": ("create", frozenset({"create", "check", "-h", "--help", "-q", "--quiet"})),
}

# Old option names still taken for one release, with a note naming the new one:
# command -> {old: new}.  A name keeps one meaning and one kind in every command.
OLD_OPTIONS: dict[str, dict[str, str]] = {
    "keygen": {"--trust": "--add-trust"},  # --trust is an allowed signers file elsewhere
    "backup create": {
        "--to": "--out",
        "--passphrase-env": "--archive-passphrase-env",  # elsewhere the signing key's
        "--passphrase": "--archive-passphrase",
    },
    "backup check": {
        "--passphrase-env": "--archive-passphrase-env",
        "--passphrase": "--archive-passphrase",
    },
    "restore": {
        "--to": "--out",
        "--passphrase-env": "--archive-passphrase-env",
        "--passphrase": "--archive-passphrase",
    },
    "schema": {"--write": "--out"},
    "preflight": {"--html": "--out"},
    "audit": {"--report": "--out"},
    "data check": {"--threshold": "--near-threshold"},  # elsewhere a count of signers
    "data sample": {"--html": "--out"},
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
  4    the machine could not finish (a worker killed, out of memory)
  130  interrupted (Ctrl-C)
  141  the output pipe was closed (e.g. `| head`)
  `ftmanifest run` also returns 126/127 or the command's own status.

examples:
  ftmanifest init exp.yaml && ftmanifest lock exp.yaml && ftmanifest lint exp.yaml
  ftmanifest run exp.yaml -- python train.py --config cfg.yaml
"""


def build_parser(only: str | None = None, *, light: bool = False) -> argparse.ArgumentParser:
    """The full parser, or (``only``) just the one subcommand being run, so a
    command never pays for importing the others' modules; or (``light``) the
    top level alone, every command listed from ``SUMMARIES`` with no options of
    its own, for ``--help``, ``--version`` and a missing or unknown command
    word: no command module imported (pip's pattern)."""
    parser = Parser(
        prog="ftmanifest",
        description="Signed, declarative manifests for fine-tuning experiments.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"ftmanifest {__version__}")
    sub = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        parser_class=Parser,
        help="what to do (`ftmanifest COMMAND --help` describes each, with examples)",
    )
    sub.required = True
    for name, module in COMMANDS.items():
        if light:
            sub.add_parser(name, help=SUMMARIES[name])
            continue
        if only is not None and name != only:
            continue
        mod = importlib.import_module(f"ftmanifest.cli.{module}")
        mod.add_parser(sub)
    add_quiet_everywhere(parser)  # after every command, so that none can miss it
    if not light:  # the light commands have no options to keep old names of
        add_old_options(parser, OLD_OPTIONS)
    return parser


def add_nested(actions: argparse._SubParsersAction, command: str) -> None:
    """Register ``command``'s subcommands that live in their own modules (``NESTED``)."""
    for module in NESTED.get(command, {}).values():
        importlib.import_module(f"ftmanifest.cli.{module}").add_parser(actions)


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
    deprecated_note(f"{argv[at]} PATHS...", f"{argv[at]} {default} PATHS...")
    return [*argv[: at + 1], default, *argv[at + 1 :]]


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """``run M -- CMD ...``: CMD is not ours to parse.  Any other command keeps
    its ``--`` for argparse (``lint a.yaml -- -odd-name.yaml``)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first in PASSTHROUGH_COMMANDS and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1 :]
    return argv, []


def unrecognized(argv: list[str], extras: list[str]) -> str:
    """argparse's complaint about ``extras``; for ``run M CMD ...`` without
    ``--``, where to put it: the command is everything from its first word on
    (values after an unknown option shown as ``...``, as ``shown_extras`` does)."""
    plain = f"unrecognized arguments: {shown_extras(extras)}"
    first = next((a for a in argv if not a.startswith("-")), None)
    if first not in PASSTHROUGH_COMMANDS:
        return plain
    start = argv.index(first) + 1
    cut = next((j for j in range(start, len(argv)) if argv[j] in extras), None)
    if cut is None or argv[cut].startswith("-"):
        return plain
    shown, after_option = [], False
    for token in argv[cut:]:
        option = token.startswith("-") and token != "-"
        shown.append("..." if after_option and not option else
                     shlex.quote(shown_extras([token]) if option else token))  # fmt: skip
        after_option = option and "=" not in token
    line = " ".join([shlex.join(["ftmanifest", *argv[:cut], "--"]), *shown])
    return f"put -- before the command: {escape(line)}"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _broken_pipe()


def _main(argv: Sequence[str] | None) -> int:
    argv, passthrough = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    argv = old_spelling(argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    # no command word, or one that is not a command: the top level alone can answer
    # (its help, the version, "invalid choice"), so no command module is imported
    parser = build_parser(only=first, light=first not in COMMANDS)
    args, extras = parser.parse_known_args(argv)
    if extras:
        parser.error(unrecognized(argv, extras))
    require_manifest(parser, args)
    args.passthrough = passthrough
    debug = os.environ.get("FTMANIFEST_DEBUG", "") not in ("", "0")
    try:
        with quieted(args.quiet):
            code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handler
        return code
    except FtManifestError as exc:
        if debug:
            raise
        return _main_error(exc, args)
    except KeyboardInterrupt:
        sys.stderr.write("ftmanifest: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except MemoryError:
        if debug:
            raise
        return _main_error(out_of_memory(first), args)
    except ModuleNotFoundError as exc:
        missing = missing_extra(exc, feature=f"ftmanifest {first}" if first else None)
        if missing is None or debug:
            raise
        return _main_error(missing, args)
    except Exception as exc:  # pragma: no cover - a bug by definition
        if debug:
            raise
        sys.stderr.write(
            f"ftmanifest: internal error: {type(exc).__name__}: {escape(str(exc))}\n"
            "This is a bug in ftmanifest; rerun with FTMANIFEST_DEBUG=1 for a traceback.\n"
        )
        return EXIT_BUG


def out_of_memory(command: str | None) -> ResourceError:
    """The error for a command that ran out of memory: the machine's limit, not a bug."""
    return ResourceError(
        f"ftmanifest {command or ''} ran out of memory".replace("  ", " "),
        field="memory",
        expected="enough memory for the work asked",
        observed="MemoryError",
        hint="run it with fewer parallel jobs (--jobs 1) or on smaller inputs, or free memory",
    )


def _main_error(exc: FtManifestError, args: argparse.Namespace) -> int:
    """Print ``exc`` as the command's output format asks; its exit code."""
    if getattr(args, "format", "text") == "json":
        import json

        sys.stdout.write(json.dumps({"error": exc.to_dict()}, indent=2) + "\n")
    else:
        text = error_text(exc, width=terminal_width(sys.stderr))
        sys.stderr.write(f"ftmanifest: error: {text}\n")
    return exc.exit_code


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
    tune_collector()
    code = main()
    comm = sys.modules.get("ftmanifest.distributed.comm")
    if comm is not None and comm.made_a_group:
        _exit_without_teardown(code)
    sys.exit(code)


def _exit_without_teardown(code: int) -> NoReturn:
    """End a rank that made a torch.distributed group, past the interpreter's teardown.

    The group is destroyed when the command ends, but gloo's C++ threads can still
    abort the process while the interpreter tears down (``terminate called without
    an active exception``, SIGABRT), after the command printed its result and chose
    its exit code: torchrun then reports the job as failed (seen once in about fifteen
    2-rank ``data check --distributed`` runs).  What a normal exit does for Python is
    done first: non-daemon threads joined, exit handlers run, the streams flushed.
    """
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # what the interpreter returns when its final flush fails
    os._exit(code)
