"""The documentation stays true: generated pages current, links resolving, and
the README's commands real.

The reference under docs/reference/ is rendered in memory from the code and
compared with the committed pages, as the schema test does for the JSON Schema;
every relative link of README.md and docs/ must reach a file (and a heading, when
it names one); every ``ftmanifest`` command in a shell block must parse with the
real parser, and the README's must be run by ``make demo`` (manifests/demo.sh).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
DEMO = ROOT / "manifests" / "demo.sh"
PAGES = sorted([README, *DOCS.rglob("*.md")])
README_MAX_LINES = 250


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# --- the generated reference ------------------------------------------------------


@pytest.fixture(scope="module")
def generated() -> dict[Path, str]:
    """The reference pages as the code renders them now (seconds: built once here)."""
    from ftmanifest.cli.reference import pages

    return pages()


def test_generated_reference_pages_are_current(generated: dict[Path, str]) -> None:
    from ftmanifest.cli.reference import stray

    stale = [
        rel.as_posix()
        for rel, text in generated.items()
        if not (ROOT / rel).exists() or (ROOT / rel).read_text("utf-8") != text
    ]
    assert not stale, f"stale generated pages {stale}: run `make docs`"
    extra = [_rel(p) for p in stray(ROOT, generated)]
    assert not extra, f"pages no longer generated {extra}: run `make docs` (it removes them)"


def test_the_reference_covers_every_command_and_rule(generated: dict[Path, str]) -> None:
    from ftmanifest.cli import COMMANDS
    from ftmanifest.manifest.lint_rules import RULES

    by_name = {rel.as_posix(): text for rel, text in generated.items()}
    assert {f"docs/reference/cli/{name}.md" for name in COMMANDS} <= set(by_name)
    assert all(rule in by_name["docs/reference/lint-rules.md"] for rule in RULES)
    assert "| 141 | `EXIT_BROKEN_PIPE` |" in by_name["docs/reference/exit-codes.md"]
    assert "| `unknown-key` | 1 |" in by_name["docs/reference/reasons.md"]


def test_generating_the_reference_imports_no_torch() -> None:
    code = (
        "import sys\nfrom ftmanifest.cli.reference import pages\npages()\n"
        "print('TORCH', 'torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert "TORCH False" in out.stdout, out.stdout + out.stderr


def test_a_new_exit_code_constant_needs_a_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    from ftmanifest import errors
    from ftmanifest.cli.reference import codes

    monkeypatch.setattr(errors, "EXIT_SOMETHING_NEW", 99, raising=False)
    with pytest.raises(KeyError, match="EXIT_SOMETHING_NEW"):
        codes.exit_codes()


# --- links --------------------------------------------------------------------------

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"(?<!\\)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def _prose(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, code spans blanked."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            yield number, _CODE_SPAN.sub("", line)


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: the heading's text
    (code spans as their text, link text without its target) lower-cased, without
    punctuation but ``-`` and ``_``, spaces as ``-``; a repeated one gets ``-1``..."""
    counts: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text("utf-8").splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        heading = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            title = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))
            slug = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
            slug = slug.replace(" ", "-")
            out.add(f"{slug}-{counts[slug]}" if slug in counts else slug)
            counts[slug] = counts.get(slug, 0) + 1
    return out


def _links(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in _prose(path.read_text("utf-8")):
        for match in _LINK.finditer(line):
            yield number, match.group(1)


def test_every_relative_link_reaches_a_file_and_heading() -> None:
    broken = []
    for page in PAGES:
        for number, target in _links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            where = f"{_rel(page)}:{number}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where} (no heading #{anchor} in {dest.name})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_checker_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    page.write_text("# Title `x`\n\n[ok](#title-x) [gone](b.md) `[code](c.md)`\n## Title x\n")
    assert [t for _, t in _links(page)] == ["#title-x", "b.md"]
    assert _anchors(page) == {"title-x", "title-x-1"}


def test_every_page_in_docs_is_linked_from_another_page() -> None:
    linked = set()
    for page in PAGES:
        for _, target in _links(page):
            file_part = target.partition("#")[0]
            if file_part and not re.match(r"^[a-z][a-z0-9+.-]*:", file_part):
                linked.add((page.parent / file_part).resolve())
    root = (DOCS / "index.md").resolve()  # the entry: the README links it
    orphans = [_rel(p) for p in DOCS.rglob("*.md") if p.resolve() not in linked | {root}]
    assert not orphans, f"pages nothing links to: {orphans} (link them from docs/index.md)"


# --- commands in shell blocks ------------------------------------------------------------

_SHELL = re.compile(r"^```(console|sh|shell|bash)\s*$")


def _shell_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, command line) of every shell block: ``$ `` lines of a console
    block, every line of a sh/bash block; continuation lines joined."""
    kind = None
    pending = ""
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if kind is None:
            match = _SHELL.match(line.strip())
            kind = match.group(1) if match else None
            continue
        if line.strip().startswith("```"):
            kind = None
            continue
        if pending:
            line = pending + line
        elif kind == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        yield number, line


def _ftmanifest_commands(line: str) -> Iterator[list[str]]:
    """The argument lists of every ``ftmanifest`` (or ``... -m ftmanifest``) call in
    one shell line, split at ``&&``, ``||``, ``;`` and ``|``."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    words: list[str] = []
    for token in [*lexer, ";"]:
        if token and set(token) <= set(";&|"):
            if "ftmanifest" in words:
                at = words.index("ftmanifest")
                if at == 0 or words[at - 1] == "-m":
                    yield words[at + 1 :]
            words = []
        else:
            words.append(token)


def _parse(argv: list[str]) -> str | None:
    """None when the real parser accepts ``argv``; else what it said."""
    from ftmanifest.cli import build_parser, split_passthrough

    ours, _ = split_passthrough(argv)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(ours)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1]
    return None


def _calls(path: Path) -> list[tuple[int, list[str]]]:
    return [(n, argv) for n, line in _shell_lines(path) for argv in _ftmanifest_commands(line)]


def test_every_command_in_the_docs_parses_with_the_real_parser() -> None:
    bad = []
    for page in PAGES:
        for number, argv in _calls(page):
            said = _parse(argv)
            if said:
                bad.append(f"{_rel(page)}:{number}: ftmanifest {shlex.join(argv)}: {said}")
    assert not bad, "commands the parser refuses:\n" + "\n".join(bad)


def _subcommands(command: str) -> set[str]:
    """The subcommand names of ``ftmanifest COMMAND`` (``ledger list``...), if any."""
    import argparse

    from ftmanifest.cli import build_parser

    parser = build_parser(only=command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = sub.choices[command]._subparsers
    if found is None:
        return set()
    return {n for a in found._group_actions if isinstance(a, argparse._SubParsersAction)
            for n in a.choices}  # fmt: skip


@pytest.mark.parametrize("page", [README, DOCS / "tutorial.md"], ids=_rel)
def test_the_readme_and_tutorial_run_only_commands_that_the_demo_runs(page: Path) -> None:
    from ftmanifest.cli import COMMANDS

    demo = DEMO.read_text("utf-8")
    calls = _calls(page)
    assert {argv[0] for _, argv in calls} >= {"lint", "lock", "sign", "verify", "run"}
    missing = []
    for number, argv in calls:
        assert argv[0] in COMMANDS, f"{_rel(page)}:{number}: no command {argv[0]!r}"
        name = argv[0]
        if len(argv) > 1 and argv[1] in _subcommands(name):
            name += f" {argv[1]}"
        if not re.search(rf"ftmanifest {re.escape(name)}\b", demo):
            missing.append(f"{_rel(page)}:{number}: ftmanifest {name}")
    assert not missing, "commands manifests/demo.sh never runs:\n" + "\n".join(missing)


def test_the_command_finder_sees_every_call() -> None:
    line = (
        "ftmanifest lint a.yaml && torchrun -m ftmanifest verify 'b c.yaml' | wc; echo ftmanifest"
    )
    assert list(_ftmanifest_commands(line)) == [["lint", "a.yaml"], ["verify", "b c.yaml"]]
    assert _parse(["lint", "a.yaml"]) is None
    assert "unrecognized arguments" in (_parse(["lint", "a.yaml", "--no-such"]) or "")


def test_the_readme_stays_short() -> None:
    lines = README.read_text("utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_the_reasons_page_is_the_same_after_the_heavy_modules_are_imported() -> None:
    # the full suite imports the transformers integration before this page is built; a
    # class found both by import and by reading its source was listed twice
    pytest.importorskip("torch")
    code = (
        "from ftmanifest.cli.reference import codes\nimport importlib\n"
        "before = codes.reasons_page()\n"
        "for m in codes._error_modules(heavy=True):\n    importlib.import_module(m)\n"
        "after = codes.reasons_page()\n"
        "rows = [l for l in after.splitlines() if l.startswith('| `')]\n"
        "print('SAME', before == after, 'DUPLICATES', len(rows) - len(set(rows)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert "SAME True DUPLICATES 0" in out.stdout, out.stdout + out.stderr
