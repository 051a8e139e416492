"""Every command's ``--help``: a description, examples that parse, help on every argument.

The examples are read back out of the real parsers' epilogs and parsed by the
real parser, the way ``main`` parses a command line, so an example that names
a renamed option or forgets a required one fails here.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator

import pytest

from ftmanifest.cli import build_parser, split_passthrough

Command = tuple[tuple[str, ...], argparse.ArgumentParser]


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Command]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(build_parser()))
SUBCOMMANDS = [(path, p) for path, p in COMMANDS if path]
IDS = [" ".join(path) or "ftmanifest" for path, _ in COMMANDS]


def examples(parser: argparse.ArgumentParser) -> list[list[str]]:
    """The command lines under ``examples:`` in the epilog, each cut at ``&&``
    (``a && b`` is two) and split as a shell splits them."""
    text = parser.epilog or ""
    if "examples:" not in text:
        return []
    out: list[list[str]] = []
    for line in text[text.index("examples:") :].splitlines()[1:]:
        if not line.startswith("  "):
            break
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            out.append(words[:cut])
            words = words[cut + 1 :]
    return out


def test_there_are_about_thirty_commands_and_all_are_walked() -> None:
    assert len(SUBCOMMANDS) >= 29
    assert {"verify", "ledger", "data"} <= {path[0] for path, _ in SUBCOMMANDS}
    assert ("ledger", "invalidate") in {path for path, _ in SUBCOMMANDS}


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=IDS)
def test_every_command_has_a_description_and_examples(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    assert (parser.description or "").strip(), f"{parser.prog} has no description"
    found = examples(parser)
    assert found, f"{parser.prog} has no examples in its epilog"
    for argv in found:
        assert argv[: 1 + len(path)] == ["ftmanifest", *path], (parser.prog, argv)
    text = parser.format_help()
    assert parser.description.splitlines()[0] in text  # kept as written, not refilled
    assert "examples:\n  ftmanifest " in text


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=IDS)
def test_every_example_parses_with_the_real_parser(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    for argv in examples(parser):
        args, passthrough = split_passthrough(argv[1:])
        try:
            parsed = build_parser().parse_args(args)
        except SystemExit as exc:  # argparse's usage error
            pytest.fail(f"{shlex.join(argv)} does not parse (exit {exc.code})")
        for depth, name in enumerate(path):
            assert getattr(parsed, ("command", "action")[depth]) == name, argv
        assert bool(passthrough) == (parsed.command == "run"), argv


@pytest.mark.parametrize(("path", "parser"), SUBCOMMANDS, ids=IDS[1:])
def test_every_argument_has_help(path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    missing = [
        a.option_strings or a.dest
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()
    ]
    assert missing == [], parser.prog


def test_the_top_level_command_list_has_help() -> None:
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert sub.help


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=IDS)
def test_help_strings_are_whole_sentences_not_fragments(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    """The slip this test was written for: ``--trust`` read "found from the or
    as for verify for --manifest"."""
    for action in parser._actions:
        text = " ".join((action.help or "").split())
        for fragment in (" the or ", " the)", " for for ", "  "):
            assert fragment not in text, (parser.prog, action.dest, text)


def test_trust_help_says_where_the_file_is_looked_for() -> None:
    paths = [("verify",), ("backup", "create"), ("backup", "check"), ("restore",), ("signers",),
             ("check-adapter",)]  # fmt: skip
    for path in paths:
        parser = dict(COMMANDS)[path]
        trust = next(a for a in parser._actions if "--trust" in a.option_strings)
        assert "$FTMANIFEST_TRUST_FILE" in (trust.help or ""), path
        assert ".ftmanifest/allowed_signers" in (trust.help or ""), path


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=IDS)
def test_no_help_shows_an_empty_default(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    """An empty default (``--comment`` defaults to '') is no default worth showing."""
    text = parser.format_help()
    assert "(default: )" not in " ".join(text.split()), text
