"""The reference pages under ``docs/reference/``, generated from the code.

Layer: commands - edge, above every room; not a subcommand, and nothing else imports it.
It renders, as Markdown, the command line's parsers (``commands``), the
manifest fields from the JSON Schema the pydantic model generates, the lint
rules, the exit and reason codes of the error classes (``codes``), the
public Python API (``api``), and the environment variables, files and formats
(``environment``).
``make docs`` rewrites every page (``python -m ftmanifest.cli.reference``),
``make schema`` the manifest page; ``tests/docs_test.py`` renders them in
memory and fails when a committed page differs.  Imports no torch.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from pathlib import Path

from ftmanifest import PUBLIC
from ftmanifest.cli.reference import codes
from ftmanifest.cli.reference.api import api_page
from ftmanifest.cli.reference.commands import cli_pages
from ftmanifest.cli.reference.environment import compatibility_page, environment_page, files_page
from ftmanifest.cli.reference.markdown import GENERATED, escape

__all__ = ["REFERENCE", "main", "pages", "stray", "write"]

REFERENCE = Path("docs") / "reference"


def manifest_page() -> str:
    from ftmanifest.manifest.schema import generate, markdown_reference

    return "\n".join(
        [
            GENERATED,
            "",
            "# Manifest fields",
            "",
            "Every field of the manifest, from the pydantic model (the source of truth) through",
            "the JSON Schema it generates (`ftmanifest schema`; the committed copy is",
            "[schema/ftmanifest.schema.json](../../schema/ftmanifest.schema.json)). A path",
            "`a.b[]` is a list of mappings; `(kind=...)` names the branch of a field whose",
            "mapping depends on its `kind`; *optional* fields may be absent or null. The",
            "loading rules (duplicate keys, unknown fields, YAML tags...) are in",
            "[the manifest guide](../guides/manifest.md).",
            "",
            markdown_reference(generate()),
        ]
    )


def lint_page() -> str:
    from ftmanifest.lint import FILL_RULES, VARIANT_RULES
    from ftmanifest.manifest.lint_rules import RULES

    rows = [("FTM000", "the file reads, parses and matches the schema (exit 2 otherwise)")]
    rows += [(rule.id, rule.title) for rule in RULES.values()]
    rows += [*FILL_RULES.items(), *VARIANT_RULES.items()]
    rows.sort()
    lines = [
        GENERATED,
        "",
        "# Lint rules",
        "",
        "`ftmanifest lint` and the pre-commit hook apply these rules (`ftmanifest.lint`).",
        "Rule ids are stable: they are never renumbered, only added. A problem exits 1, an",
        "unusable file (FTM000) exits 2, a warning alone exits 0.",
        "",
        "| rule | checks |",
        "|---|---|",
        *(f"| {rule} | {escape(title, table=True)} |" for rule, title in rows),
        "",
    ]
    return "\n".join(lines)


def index_page(paths: Iterable[Path]) -> str:
    titles = {
        "cli/index.md": "Command line: every command, its arguments and options",
        "manifest.md": "Manifest fields: every field, its type and meaning",
        "lint-rules.md": "Lint rules: the static pinning rules and their ids",
        "exit-codes.md": "Exit codes and the kinds of error behind them",
        "reasons.md": "Reason codes: the stable codes scripts can match",
        "api.md": "Python API: the names the package root exports",
        "environment.md": "Environment variables: what ftmanifest reads, sets and judges",
        "files.md": "Files and folders ftmanifest writes",
        "compatibility.md": "Compatibility: the formats and what later releases promise",
    }
    listed = {p.relative_to(REFERENCE).as_posix() for p in paths}
    lines = [
        GENERATED,
        "",
        "# Reference",
        "",
        "Generated from the code; `make docs` rewrites it.",
        "",
    ]
    lines += [f"- [{title}]({rel})" for rel, title in titles.items() if rel in listed]
    return "\n".join([*lines, ""])


def pages() -> dict[Path, str]:
    """Every generated page: its path from the repository root -> its text."""
    out = cli_pages()
    out[REFERENCE / "manifest.md"] = manifest_page()
    out[REFERENCE / "lint-rules.md"] = lint_page()
    out[REFERENCE / "exit-codes.md"] = codes.exit_codes_page()
    out[REFERENCE / "reasons.md"] = codes.reasons_page()
    out[REFERENCE / "api.md"] = api_page(PUBLIC)
    out[REFERENCE / "environment.md"] = environment_page()
    out[REFERENCE / "files.md"] = files_page()
    out[REFERENCE / "compatibility.md"] = compatibility_page()
    out[REFERENCE / "index.md"] = index_page(out)
    return dict(sorted(out.items()))


def stray(root: Path, generated: Iterable[Path]) -> list[Path]:
    """Pages under docs/reference/ that are no longer generated (a removed command's)."""
    keep = {root / p for p in generated}
    return sorted(p for p in (root / REFERENCE).rglob("*.md") if p not in keep)


def write(root: Path, only: Sequence[str] = ()) -> list[Path]:
    """Write the pages under ``root`` (``only``: those whose path ends with one
    of these names) and, when writing all, remove stray ones; return what changed."""
    changed: list[Path] = []
    all_pages = pages()
    for rel, text in all_pages.items():
        if only and not any(rel.as_posix().endswith(name) for name in only):
            continue
        path = root / rel
        if not path.exists() or path.read_text("utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
            changed.append(rel)
    if not only:
        for path in stray(root, all_pages):
            path.unlink()
            changed.append(path.relative_to(root))
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ftmanifest.cli.reference",
        description="Rewrite the generated pages under docs/reference/ (all, or the named ones).",
    )
    parser.add_argument("only", nargs="*", metavar="PAGE", help="e.g. manifest.md")
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository root")
    args = parser.parse_args(argv)
    for rel in write(args.root, args.only):
        print(f"wrote {rel.as_posix()}")
    return 0
