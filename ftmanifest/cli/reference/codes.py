"""The exit codes and the stable reason codes, as reference pages.

Layer: commands - edge (reads ``ftmanifest.errors``, the CLI's own exit code and every
module that defines an error class with a ``reason``).  The modules are found
by reading the package's source, not by a list kept here, so an error class
added or moved anywhere appears on the page.  A module that imports an optional
framework at its top (the Trainer guard imports transformers) is read from its
source instead of imported, so generating the pages pulls no torch.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import NamedTuple

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


HEAVY = frozenset({"torch", "transformers", "peft", "trl", "datasets", "accelerate"})


def _imports_heavy(tree: ast.Module) -> bool:
    """The module imports an optional framework at its top level."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            tops = {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops = {node.module.partition(".")[0]}
        else:
            continue
        if tops & HEAVY:
            return True
    return False


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def _error_modules(heavy: bool = False) -> list[str]:
    """Modules of the package whose classes set a ``reason`` code: those safe to
    import, or (``heavy``) those that import an optional framework at their top."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        if _imports_heavy(tree) != heavy:
            continue
        if any(
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "reason" for t in stmt.targets)
            for node in tree.body
            if isinstance(node, ast.ClassDef)
            for stmt in node.body
        ):
            names.append(_module_name(path))
    return names


class Row(NamedTuple):
    """One reason code as the page shows it."""

    reason: str
    exit_code: object
    where: str
    doc: str


def _source_rows(module: str, known: dict[str, type]) -> list[Row]:
    """The reason rows of a module read from its source (it imports a framework):
    each class that sets ``reason``, its exit code taken from its own ``exit_code``
    or its base's (a class of the same module, or an error class already known)."""
    path = PACKAGE.parent.joinpath(*module.split(".")).with_suffix(".py")
    classes = {
        n.name: n for n in ast.parse(path.read_text("utf-8")).body if isinstance(n, ast.ClassDef)
    }

    def attr(node: ast.ClassDef, name: str) -> object:
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in stmt.targets
            ):
                return ast.literal_eval(stmt.value) if name == "reason" else stmt.value
        return None

    def exit_code(node: ast.ClassDef) -> object:
        own = attr(node, "exit_code")
        if isinstance(own, ast.Constant):
            return own.value
        if isinstance(own, ast.Name) and own.id.startswith("EXIT_"):
            from ftmanifest import errors

            return getattr(errors, own.id, "")
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                return exit_code(classes[base.id])
            if isinstance(base, ast.Name) and base.id in known:
                return getattr(known[base.id], "exit_code", "")
        return ""

    rows = []
    for name, node in classes.items():
        reason = attr(node, "reason")
        if isinstance(reason, str) and reason:
            doc = (ast.get_docstring(node, clean=True) or "").replace("``", "`")
            first = " ".join(doc.split("\n\n")[0].split())
            rows.append(Row(reason, exit_code(node), f"`{module}.{name}`", first))
    return rows


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
    # only the package's own: a class a test (or a plugin) defines is no code of ftmanifest's;
    # the heavy modules' classes are read from their source whether or not a caller (a test in
    # the same process) has imported them, so the page is the same either way
    heavy = set(_error_modules(heavy=True))
    own = {
        c for c in out if c.__module__.split(".")[0] == "ftmanifest" and c.__module__ not in heavy
    }
    return sorted(own, key=lambda c: (c.__module__, c.__qualname__))


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


def reason_rows() -> list[Row]:
    """Every reason code of the package: imported classes, then those read from source."""
    classes = error_classes()
    rows = [
        Row(
            cls.__dict__["reason"],
            getattr(cls, "exit_code", ""),
            f"`{cls.__module__}.{cls.__qualname__}`",
            _doc(cls),
        )
        for cls in classes
        if cls.__dict__.get("reason")
    ]
    known = {cls.__name__: cls for cls in classes}
    for module in _error_modules(heavy=True):
        rows += _source_rows(module, known)
    return rows


def reasons_page() -> str:
    rows = [
        f"| `{r.reason}` | {r.exit_code} | {r.where} | {escape(r.doc, table=True)} |"
        for r in reason_rows()
    ]
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
