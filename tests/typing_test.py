"""The public API and the core rooms stay fully typed (STYLE.md, habit 12).

pyproject.toml turns on --strict's flags for the package root, every top-level
module and the rooms in ``ROOMS`` (and its two global-only flags for the whole run),
so the everyday ``mypy ftmanifest`` run, which ``tests/style_test.py`` runs and
expects clean, is ``mypy --strict`` there.  The test reads that configuration as
mypy does: a core module that loses a flag fails it, so one mypy run checks both.
"""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ftmanifest"
ROOMS = ("manifest", "signing", "ledger", "verify", "results", "adapter", "backup")
# --strict's per-module flags, as mypy's Options name them (implicit_reexport is off)
STRICT_FLAGS = (
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "check_untyped_defs",
    "disallow_untyped_decorators",
    "warn_return_any",
    "warn_unused_ignores",
    "strict_equality",
    "extra_checks",
)

needs_mypy = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed: pip install -e '.[dev]' to check the package's types",
)


def _strict_files() -> list[Path]:
    files = sorted(PACKAGE.glob("*.py"))
    for room in ROOMS:
        files += sorted((PACKAGE / room).rglob("*.py"))
    return files


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


@needs_mypy
def test_the_everyday_mypy_run_checks_the_core_strictly() -> None:
    from mypy.config_parser import parse_config_file
    from mypy.options import Options

    options, errors, global_strict = Options(), io.StringIO(), []
    parse_config_file(
        options, lambda: global_strict.append(True), str(ROOT / "pyproject.toml"), None, errors
    )
    assert not errors.getvalue(), errors.getvalue()
    # `strict = true` in an override would make every module strict, not the ones listed
    assert not global_strict, "pyproject.toml sets strict = true: spell out the flags instead"
    loose = {}
    for path in _strict_files():
        per = options.clone_for_module(_module(path))
        off = [f for f in STRICT_FLAGS if not getattr(per, f)]
        if per.implicit_reexport:
            off.append("no_implicit_reexport")
        if off:
            loose[_module(path)] = off
    assert not loose, f"not strict in pyproject.toml's [[tool.mypy.overrides]]: {loose}"
    # --strict's flags that mypy only reads for the whole run
    assert options.warn_redundant_casts and options.warn_unused_configs
    # control: a module outside the list keeps the lenient defaults, so the check above
    # reads the per-module flags and not global ones
    outside = options.clone_for_module("not_ftmanifest.module")
    assert not outside.disallow_untyped_defs and not outside.warn_return_any
