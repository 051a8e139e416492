"""A thin CLI: the library never sees argparse.

Each command module parses, calls the library and renders; the library takes
plain values, so no function outside ``ftmanifest/cli`` is annotated with an
``argparse.Namespace`` (or takes the parsed options as ``args``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ftmanifest"
CLI = PACKAGE / "cli"


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text("utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_no_library_function_takes_an_argparse_namespace() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if CLI in path.parents:
            continue
        for fn in _functions(path):
            params = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
            for a in params:
                note = ast.unparse(a.annotation) if a.annotation is not None else ""
                if "Namespace" in note and "SimpleNamespace" not in note:
                    bad.append(f"{path.relative_to(PACKAGE)}:{fn.lineno} {fn.name}({a.arg})")
    assert not bad, bad


def test_the_distributed_launch_checks_take_the_timeout_not_the_options() -> None:
    import inspect

    from ftmanifest.distributed import shard

    for fn in (shard.launched, shard.no_rank_timeout):
        assert list(inspect.signature(fn).parameters) == ["rank_timeout", "example"]


def test_rank_timeout_is_judged_from_a_plain_value() -> None:
    import pytest

    from ftmanifest.distributed.shard import no_rank_timeout
    from ftmanifest.errors import UsageError

    no_rank_timeout(None, "scan PATH")
    with pytest.raises(UsageError, match="needs --distributed"):
        no_rank_timeout(30.0, "scan PATH")


def _imported(tree: ast.AST, module: str) -> set[str]:
    """Every module an ``import`` in ``tree`` names, at any depth, relative ones
    resolved against ``module``; ``from P import N`` counts as ``P`` and ``P.N``."""
    package = module.rsplit(".", 1)[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            names |= {base} | {f"{base}.{a.name}" for a in node.names}
    return names


def _commands_imported_by(path: Path) -> set[str]:
    """The command modules (``ftmanifest.cli.X``, X not private) ``path`` imports."""
    commands = {f"ftmanifest.cli.{p.stem}" for p in CLI.glob("*.py") if not p.stem.startswith("_")}
    module = f"ftmanifest.cli.{path.stem}"
    return {
        name
        for name in _imported(ast.parse(path.read_text("utf-8")), module)
        if name in commands and name != module
    }


def test_no_command_module_imports_another() -> None:
    """Shared parser pieces live in ``cli._args``, shared renderings in
    ``cli._render`` and ``cli._verify_report``; ``ftmanifest.cli`` itself (the
    registry) may be imported."""
    bad = {
        path.name: sorted(found)
        for path in sorted(CLI.glob("*.py"))
        if path.name != "__init__.py" and (found := _commands_imported_by(path))
    }
    assert not bad, bad


def test_the_command_import_check_sees_every_spelling(tmp_path: Path) -> None:
    src = (
        "from ftmanifest.cli import verify\n"
        "from ftmanifest.cli.scan import x\n"
        "import ftmanifest.cli.lint\n"
        "from ftmanifest.cli import _args, main\n"
        "from ftmanifest.cli._render import trusted_line\n"
        "def f():\n"
        "    from ftmanifest.cli.preflight import y\n"
        "    from . import prune\n"
        "    from .data import z\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(src, "utf-8")
    found = {n.removeprefix("ftmanifest.cli.") for n in _commands_imported_by(path)}
    assert found == {"verify", "scan", "lint", "preflight", "prune", "data"}
