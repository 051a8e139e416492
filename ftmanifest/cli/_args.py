"""What the command modules' parsers share: the parser class and its help
formatter, and the options several commands take alike (``-q/--quiet`` on every
command, ``--format``, ``--trust``, verify's observation options,
``--distributed``, a backup's ``-i``/``--trust``).

Layer: commands (private to ``ftmanifest.cli``: a command module imports this,
never another command module).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
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


class Parser(argparse.ArgumentParser):
    """Every parser of the tool, the subcommands' included (``add_subparsers``
    makes its parsers of this class): no abbreviated options, since an
    abbreviation such as ``--pass`` for ``--passphrase-env`` would let a
    secret typed as an option be taken as a variable name and echoed; the
    defaults shown in ``--help``.  argparse exits 2 on usage errors, which
    matches our convention."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {shown_extras(extras)}")
        return parsed


def shown_extras(extras: list[str]) -> str:
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


# Where a trust file is looked for when --trust is not given (signing.locate).
TRUST_DEFAULT = (
    "$FTMANIFEST_TRUST_FILE, else .ftmanifest/allowed_signers at the root of the "
    "repository holding {what}"
)


class _OneManifest(argparse.Action):
    """The manifest as ``M`` or ``--manifest M``: the same value, given once."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if values is None:
            return  # the positional, not given (argparse calls it with nothing)
        seen = getattr(namespace, self.dest, None)
        if seen is not None and seen != values:
            parser.error(f"the manifest is given twice ({seen} and {values}): give it once")
        setattr(namespace, self.dest, values)


def add_manifest_argument(
    parser: argparse.ArgumentParser,
    help: str = "the experiment's manifest",  # noqa: A002 - argparse's own word
    *,
    kind: Any = Path,
    dest: str = "manifest",
) -> None:
    """The manifest, positional as everywhere (``cmd M``), ``--manifest M`` accepted too.

    Neither given is a usage error (exit 2) from ``require_manifest``.
    """
    parser.add_argument(dest, nargs="?", type=kind, metavar="MANIFEST", help=help,
                        action=_OneManifest, default=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--manifest", dest=dest, type=kind, metavar="MANIFEST",
                        action=_OneManifest, default=argparse.SUPPRESS,
                        help="the same, as an option")  # fmt: skip
    parser.set_defaults(**{dest: None}, manifest_required=dest)


def require_manifest(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A usage error when a command that takes ``add_manifest_argument`` got neither form."""
    dest = getattr(args, "manifest_required", None)
    if dest and getattr(args, dest, None) is None:
        parser.error("the manifest is required: give it as MANIFEST or --manifest MANIFEST")


def trust_help(what: str = "the manifest") -> str:
    """The help of a ``--trust PATH`` found as ``signing.locate`` finds it."""
    return f"allowed signers file (default: {TRUST_DEFAULT.format(what=what)})"


BACKUP_TRUST_HELP = (
    "allowed signers file (default: $FTMANIFEST_TRUST_FILE, else .ftmanifest/allowed_signers "
    "at the root of the repository holding the current folder; never one in the backups "
    "folder)"
)


def add_trust_arguments(parser: argparse.ArgumentParser) -> None:
    """``--no-signature``, ``--trust PATH`` and ``--threshold N``, as verify and audit take them."""
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
    parser.add_argument(
        "--code",
        type=Path,
        metavar="DIR",
        help="training code folder for the commit check (default: manifest's folder)",
    )
    parser.add_argument(
        "--allow-outside",
        action="store_true",
        help="allow data/model paths outside the manifest's repository (or folder)",
    )


QUIET_HELP = (
    "no progress line and no notes on stderr; warnings, errors, what is printed on "
    "stdout and the exit code stay as they are"
)


def add_quiet_everywhere(parser: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` on ``parser`` and on every command and subcommand under it, with
    one meaning (``progress.quieted``): given before the command or after its name.

    The top parser's default (False) is the value; the commands' own are suppressed
    so that one not given there keeps what was given before the command."""
    _add_quiet(parser, False, f"{QUIET_HELP} (on a terminal the progress line shows "
               "after $FTMANIFEST_PROGRESS_DELAY seconds of work, default 1)")  # fmt: skip
    seen: set[int] = {id(parser)}
    todo = [parser]
    while todo:
        for action in todo.pop()._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            for sub in action.choices.values():
                if id(sub) not in seen:  # an alias names the same parser
                    seen.add(id(sub))
                    _add_quiet(sub, argparse.SUPPRESS, QUIET_HELP)
                    todo.append(sub)


def _add_quiet(parser: argparse.ArgumentParser, default: Any, text: str) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", default=default, help=text)


def deprecated_note(old: str, new: str) -> None:
    """The one note for a spelling still taken for a release: ``old`` and ``new``
    are command lines after ``ftmanifest``."""
    sys.stderr.write(
        f"ftmanifest: note: `ftmanifest {old}` is deprecated; write `ftmanifest {new}`\n"
    )


class _OldSpelling(argparse.Action):
    """An option's old name: parsed as the new one (same value, same destination),
    with one note on stderr however often it is given; hidden from ``--help``."""

    def __init__(self, option_strings: list[str], dest: str, *, target: argparse.Action,
                 command: str, replaced_by: str, **kwargs: Any) -> None:  # fmt: skip
        # what reads the value on the command line is the new option's
        same: dict[str, Any] = {k: getattr(target, k) for k in ("nargs", "const", "type",
                                                                "choices", "metavar")}  # fmt: skip
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                         **same)  # fmt: skip
        self.target, self.command, self.replaced_by = target, command, replaced_by
        self.noted = False

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if not self.noted:
            self.noted = True
            old = self.option_strings[0]
            deprecated_note(f"{self.command} {old}", f"{self.command} {self.replaced_by}")
        self.target(parser, namespace, values, self.replaced_by)


def add_old_options(parser: argparse.ArgumentParser, table: dict[str, dict[str, str]]) -> None:
    """For each command path in ``table`` (``"backup create"``) that ``parser`` holds, its
    old option names as hidden aliases of the new ones (``{old: new}``)."""
    todo: list[tuple[str, argparse.ArgumentParser]] = [("", parser)]
    seen: set[int] = set()
    while todo:
        path, at = todo.pop()
        if id(at) in seen:  # an alias names the same parser
            continue
        seen.add(id(at))
        for old, new in table.get(path, {}).items():
            target = at._option_string_actions[new]
            at.add_argument(old, action=_OldSpelling, dest=target.dest, target=target,
                            command=path, replaced_by=new)  # fmt: skip
        for action in at._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in dict(action.choices).items():
                    todo.append((f"{path} {name}".strip(), sub))


def add_format_argument(parser: argparse.ArgumentParser, *, sarif: bool = False) -> None:
    choices = ["text", "json", "sarif"] if sarif else ["text", "json"]
    parser.add_argument("--format", choices=choices, default="text", help="output format")


def add_distributed_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--distributed`` (``what`` the ranks do) and ``--rank-timeout``."""
    parser.add_argument("--distributed", action="store_true", help=f"under torchrun: {what}")
    parser.add_argument(
        "--rank-timeout",
        type=float,
        default=None,
        metavar="S",
        help="with --distributed: seconds to wait for every rank to join and answer (default 300)",
    )


def add_opening_arguments(parser: argparse.ArgumentParser, when: str = "") -> None:
    """``-i`` and ``--trust``: what opens and judges a backup (``backup check``, ``restore``)."""
    parser.add_argument(
        "-i",
        "--identity",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help=f"{when}age identity file or ssh-ed25519 private key (repeatable)",
    )
    parser.add_argument("--trust", type=Path, metavar="PATH", help=BACKUP_TRUST_HELP)
