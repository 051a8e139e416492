"""The exit codes and the stable reason codes, as reference pages.

Layer: edge (reads ``ftmanifest.errors``, the CLI's own exit code and every
module that defines an error class with a ``reason``).  The modules are found
by reading the package's source, not by a list kept here, so an error class
added or moved anywhere appears on the page; importing them pulls no torch.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from ftmanifest.cli.reference.markdown import GENERATED, escape

PACKAGE = Path(__file__).resolve().parents[2]

# What each exit code constant means, in the words of the README's table; a
# constant without an entry here is an error, so a new code cannot go unsaid.
MEANINGS = {
    "EXIT_OK": "ok",
    "EXIT_REFUSED": "a check refused: drift, lint problems, scan findings, an untrusted "
    "or changed signature, a failed preflight, leakage over the tolerance...",
    "EXIT_INPUT": "unusable input or usage: an unreadable or invalid file, bad arguments",
    "EXIT_BUG": "internal error, a bug in ftmanifest (`FTMANIFEST_DEBUG=1` shows the traceback)",
    "EXIT_RESOURCE": "the machine could not finish: a worker was killed (often out of memory) "
    "or memory ran out; the hint says how to ask for less (`--jobs 1`)",
    "EXIT_CANNOT_EXECUTE": "`run`: the command exists but cannot be executed, as a shell says",
    "EXIT_NOT_FOUND": "`run`: the command was not found, as a shell says",
    "EXIT_INTERRUPTED": "interrupted (Ctrl-C)",
    "EXIT_BROKEN_PIPE": "the output pipe was closed early (`ftmanifest ... | head`), "
    "as git and coreutils end",
}


def exit_codes() -> list[tuple[int, str, str]]:
    """``(code, constant, meaning)`` for every ``EXIT_*`` constant of the errors
    module and the command line, lowest code first."""
    from ftmanifest import cli, errors

    found: dict[str, int] = {}
    for module in (errors, cli):
        found |= {k: v for k, v in vars(module).items() if k.startswith("EXIT_")}
    missing = sorted(set(found) - set(MEANINGS))
    if missing:
        raise KeyError(f"exit code constants without a meaning in {__name__}: {missing}")
    return sorted((code, name, MEANINGS[name]) for name, code in found.items())


def _error_modules() -> list[str]:
    """Modules of the package whose classes set a ``reason`` code."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        if any(
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "reason" for t in stmt.targets)
            for node in tree.body
            if isinstance(node, ast.ClassDef)
            for stmt in node.body
        ):
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            names.append(".".join(parts).removesuffix(".__init__"))
    return names


def error_classes() -> list[type]:
    """Every subclass of ``FtManifestError`` in the modules that define reasons
    and in ``ftmanifest.errors``, in a stable order."""
    from ftmanifest.errors import FtManifestError

    for name in _error_modules():
        importlib.import_module(name)
    out: list[type] = []
    todo: list[type] = [FtManifestError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo += cls.__subclasses__()
    return sorted(set(out), key=lambda c: (c.__module__, c.__qualname__))


def _doc(cls: type) -> str:
    """The first sentence of the class's own docstring ('' when it has none)."""
    doc = (cls.__dict__.get("__doc__") or "").replace("``", "`")  # reST quotes, as Markdown
    return " ".join(doc.strip().split("\n\n")[0].split())


def exit_codes_page() -> str:
    from ftmanifest.errors import FtManifestError

    lines = [
        GENERATED,
        "",
        "# Exit codes",
        "",
        "Every command ends with one of these codes (the constants are in",
        "`ftmanifest.errors` and `ftmanifest.cli`). `ftmanifest run` otherwise returns",
        "the command's own status, or 128+N when signal N ended it (143 for SIGTERM, 137",
        "for SIGKILL); `--refused-exit N` makes its refusals exit N instead of 1 or 2.",
        "",
        "| code | constant | meaning |",
        "|---|---|---|",
        *(f"| {c} | `{n}` | {escape(m, table=True)} |" for c, n, m in exit_codes()),
        "",
        "## Error kinds",
        "",
        "The library raises one of these (or a subclass); the command line prints its",
        "message, field, expected and observed values and fix, and exits with its code.",
        "Scripts match the [reason code](reasons.md) in `--format json`, never the message.",
        "",
        "| error | code | what |",
        "|---|---|---|",
    ]
    for cls in error_classes():
        if cls.__module__ == FtManifestError.__module__:
            code = getattr(cls, "exit_code", "")
            lines.append(f"| `{cls.__name__}` | {code} | {escape(_doc(cls), table=True)} |")
    return "\n".join([*lines, ""])


def reasons_page() -> str:
    rows = []
    for cls in error_classes():
        reason = cls.__dict__.get("reason")
        if reason:
            where = f"`{cls.__module__}.{cls.__qualname__}`"
            doc = escape(_doc(cls), table=True)
            rows.append(f"| `{reason}` | {getattr(cls, 'exit_code', '')} | {where} | {doc} |")
    lines = [
        GENERATED,
        "",
        "# Reason codes",
        "",
        "A refusal or input error that scripts may want to tell apart carries a stable",
        "`reason` code: it is the `reason` field of the error object that",
        "`--format json` prints, and the `reason:` line of the text output. The",
        "[signing](../guides/signing.md#reason-codes) and",
        "[backup](../guides/backups.md#restore) guides say what to do about theirs.",
        "",
        "| reason | exit | error class | what |",
        "|---|---|---|---|",
        *sorted(rows),
        "",
    ]
    return "\n".join(lines)
