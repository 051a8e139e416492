"""The environment, files and compatibility reference pages stay true to the code."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from ftmanifest.cli.reference import environment

PACKAGE = Path(environment.__file__).resolve().parents[2]
NAME = re.compile(r"\bFTMANIFEST_[A-Z_]+\b")


def names_in_code(root: Path) -> set[str]:
    """Every FTMANIFEST_* name the package's own source mentions, but for this page's table."""
    own = Path(environment.__file__).resolve()
    found: set[str] = set()
    for path in root.rglob("*.py"):
        if path.resolve() != own:
            found.update(NAME.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_variable_the_code_names_is_documented_and_no_other() -> None:
    documented = {v.name for v in environment.ENVIRONMENT}
    in_code = names_in_code(PACKAGE)
    assert in_code - documented == set(), "add these to ENVIRONMENT"
    assert documented - in_code == set(), "ENVIRONMENT lists variables the code never reads"


def test_the_check_sees_an_undocumented_variable(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text('os.environ.get("FTMANIFEST_NEW_KNOB")\n', encoding="utf-8")
    assert "FTMANIFEST_NEW_KNOB" in names_in_code(tmp_path)
    assert "FTMANIFEST_NEW_KNOB" not in {v.name for v in environment.ENVIRONMENT}


@pytest.mark.parametrize("fmt", environment.FORMATS, ids=lambda f: f.name)
def test_each_format_identifier_is_what_the_code_writes(fmt: environment.Format) -> None:
    module, _, constant = fmt.source.partition(":")
    value = str(getattr(importlib.import_module(module), constant))
    assert value in fmt.identifier, f"{fmt.source} is {value!r}; the page says {fmt.identifier!r}"


def test_the_pages_name_every_row() -> None:
    env_page = environment.environment_page()
    assert all(f"| {v.name} |" in env_page for v in environment.ENVIRONMENT)
    compat = environment.compatibility_page()
    assert all(f.identifier in compat for f in environment.FORMATS)
    files = environment.files_page()
    assert "0600" in files and "statcache-v1.sqlite3" in files
