"""The command line's reference pages, from its argparse parsers.

Layer: commands - edge (reads ``ftmanifest.cli.build_parser``; renders Markdown).  One
page per command, its subcommands as sections, and an index.  The usage line
is built here from the parser's arguments rather than by argparse's formatter,
so the page does not depend on the terminal's width or the Python version;
help texts are expanded as ``--help`` expands them (defaults filled in).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ftmanifest.cli.reference.markdown import GENERATED, code, escape, text_blocks

CLI = Path("docs") / "reference" / "cli"


# --- the command line ---------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """``(name, parser, one-line help)`` of each subcommand, in the order they were added;
    an alias is not listed again."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            seen: set[int] = set()
            out = []
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    out.append((name, sub, helps.get(name, "")))
            return out
    return []


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        mv = action.metavar
        return " ".join(mv) if isinstance(mv, tuple) else str(mv)
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest if not action.option_strings else action.dest.upper()


def _argument(action: argparse.Action) -> str:
    """The argument's part of the usage line, without brackets."""
    mv = _metavar(action)
    nargs = action.nargs
    if nargs == 0:
        args = ""
    elif nargs is None:
        args = mv
    elif nargs == "?":
        args = f"[{mv}]"
    elif nargs == "*":
        args = f"[{mv} ...]"
    elif nargs == "+":
        args = f"{mv} [{mv} ...]"
    elif nargs == argparse.REMAINDER:
        args = "..."
    elif nargs == argparse.PARSER:
        args = f"{mv} ..."
    elif isinstance(nargs, int):
        args = " ".join([mv] * nargs)
    else:
        args = mv
    if not action.option_strings:
        return args
    return f"{action.option_strings[0]} {args}".rstrip()


def _shown(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction)


def usage(parser: argparse.ArgumentParser) -> str:
    """One usage line, as ``--help`` means it but independent of the terminal's
    width and of the Python version's formatting."""
    if parser.usage:
        return parser.usage % {"prog": parser.prog}
    groups = {id(a): g for g in parser._mutually_exclusive_groups for a in g._group_actions}
    parts: list[str] = []
    done: set[int] = set()
    optional = [a for a in parser._actions if a.option_strings and _shown(a)]
    positional = [a for a in parser._actions if not a.option_strings and _shown(a)]
    for action in optional + positional:
        if id(action) in done:
            continue
        group = groups.get(id(action))
        members = [a for a in group._group_actions if _shown(a)] if group else [action]
        done |= {id(a) for a in members}
        inner = " | ".join(_argument(a) for a in members)
        required = group.required if group else action.required or not action.option_strings
        if required:
            parts.append(f"({inner})" if len(members) > 1 else inner)
        else:
            parts.append(f"[{inner}]")
    return " ".join([parser.prog, *parts])


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text as ``--help`` prints it (defaults and ``%(prog)s`` filled in)."""
    if not action.help:
        return ""
    formatter = parser._get_formatter()
    return " ".join(formatter._expand_help(action).split())


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    lines: list[str] = []
    for title, wanted in (("Arguments", False), ("Options", True)):
        rows = []
        for action in parser._actions:
            if not _shown(action) or bool(action.option_strings) != wanted:
                continue
            if isinstance(action, argparse._SubParsersAction):
                continue
            if action.option_strings:
                names = ", ".join(
                    f"{o} {_metavar(action)}" if action.nargs != 0 else o
                    for o in action.option_strings
                )
            else:
                names = _argument(action)
            help_text = _help(parser, action)
            required = " (required)" if action.option_strings and action.required else ""
            rows.append(
                f"- {code(names)}{required}" + (f": {escape(help_text)}" if help_text else "")
            )
        if rows:
            lines += [f"**{title}**", "", *rows, ""]
    return lines


def _section(parser: argparse.ArgumentParser, level: int, title: str, summary: str) -> list[str]:
    lines = [f"{'#' * level} {title}", ""]
    if summary:
        lines += [escape(summary[:1].upper() + summary[1:]) + ".", ""]
    lines += ["```text", usage(parser), "```", ""]
    if parser.description:
        lines += text_blocks(parser.description)
    lines += _arguments(parser)
    subs = _subcommands(parser)
    if parser.epilog:
        lines += ["```text", *parser.epilog.rstrip().splitlines(), "```", ""]
    for _, sub, help_text in subs:
        lines += _section(sub, level + 1, code(sub.prog), help_text)
    return lines


def command_page(parser: argparse.ArgumentParser, summary: str) -> str:
    lines = [GENERATED, ""]
    lines += _section(parser, 1, code(parser.prog), summary)
    subs = _subcommands(parser)
    if subs:
        # the sections above; a list first, so a long page can be read from its top
        head = lines[: lines.index("```text")]
        index = [f"- [{code(s.prog)}](#{_anchor(s.prog)}): {escape(h)}" for _, s, h in subs]
        rest = lines[len(head) :]
        lines = head + ["Subcommands:", "", *index, "", *rest]
    lines += ["See also: [all commands](index.md), [exit codes](../exit-codes.md).", ""]
    return "\n".join(lines)


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading that is ``title`` in backticks."""
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


def cli_pages() -> dict[Path, str]:
    from ftmanifest.cli import OLD_OPTIONS, build_parser

    parser = build_parser()
    subs = _subcommands(parser)
    pages = {CLI / f"{name}.md": command_page(sub, h) for name, sub, h in subs}
    index = [GENERATED, "", "# Command line", ""]
    if parser.description:
        index += text_blocks(parser.description)
    index += ["```text", usage(parser), "```", ""]
    index += _arguments(parser)  # the options given before the command (--version, -q)
    index += [
        "Every command also takes `-h`/`--help`, which prints the same text as this reference.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    index += [f"| [{code(name)}]({name}.md) | {escape(h, table=True)} |" for name, _, h in subs]
    index += [""]
    if parser.epilog:
        index += ["```text", *parser.epilog.rstrip().splitlines(), "```", ""]
    index += _old_options(OLD_OPTIONS)
    pages[CLI / "index.md"] = "\n".join(index)
    return pages


def _old_options(table: dict[str, dict[str, str]]) -> list[str]:
    """The old option names still taken for one release (``cli.OLD_OPTIONS``)."""
    lines = [
        "## Old spellings",
        "",
        "Taken for one release more, each with a note on stderr naming the new spelling "
        "(never on stdout, so `--format json` output stays whole). A name means one thing "
        "in every command.",
        "",
        "| command | old | new |",
        "|---|---|---|",
    ]
    for command, renames in table.items():
        lines += [f"| `{command}` | `{old}` | `{new}` |" for old, new in renames.items()]
    return [*lines, ""]
