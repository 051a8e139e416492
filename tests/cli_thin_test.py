"""A thin CLI (issue 26, item 3): the library never sees argparse.

Each command module parses, calls the library and renders; the library takes
plain values, so no function outside ``ftmanifest/cli`` is annotated with an
``argparse.Namespace`` (or takes the parsed options as ``args``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ftmanifest"
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
