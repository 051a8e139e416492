"""One concept, one keyword across the public API; the old keywords still work for a
release, with a DeprecationWarning that names the new one."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ftmanifest
from ftmanifest.cli.reference.api import definition
from ftmanifest.manifest.renamed import REMOVED_IN, renamed_keywords
from tests.conftest import ROOT

MINIMAL = ROOT / "tests" / "fixtures" / "manifests" / "valid" / "minimal.yaml"
# a concept's keyword, and the names it must not go by in the public API
VOCABULARY = {
    "manifest": ("manifest_path", "manifest_file", "path"),
    "trust_path": ("trust", "trust_file"),
    "key_path": ("key_file",),
    "model_class": ("model_cls",),
    "base_dir": ("base_path", "base_folder"),
}
# function, old keyword, new keyword (what renamed_keywords still accepts)
RENAMED = [
    ("load_manifest", "path", "manifest"),
    ("verify_manifest", "path", "manifest"),
    ("check_adapter", "manifest_path", "manifest"),
    ("bind_adapter", "manifest_path", "manifest"),
    ("load_pinned", "manifest_path", "manifest"),
    ("load_pinned", "model_cls", "model_class"),
    ("load_pinned_dataset", "manifest_path", "manifest"),
    ("load_bound", "base", "base_dir"),
]


def _parameters(name: str) -> list[str]:
    _where, node = definition(ftmanifest.PUBLIC[name], name)
    assert isinstance(node, ast.FunctionDef)
    a = node.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def test_the_public_functions_give_a_concept_one_keyword() -> None:
    functions = [n for n in ftmanifest.PUBLIC if n[0].islower() and n != "lint_paths"]
    stray = [
        f"{fn}({old}=): write {new}="
        for fn in functions
        for new, olds in VOCABULARY.items()
        for old in olds
        if old in _parameters(fn)
    ]
    assert stray == []
    # the check reads the real signatures: every renamed function now has the new keyword
    for fn, old, new in RENAMED:
        assert new in _parameters(fn) and old not in _parameters(fn), fn


@pytest.mark.parametrize(("fn", "old", "new"), RENAMED)
def test_an_old_keyword_still_works_and_says_the_new_one(
    fn: str, old: str, new: str, tmp_path: Path
) -> None:
    func: Callable[..., Any] = getattr(ftmanifest, fn)
    missing = tmp_path / "absent.yaml"
    args: dict[str, Any] = {
        "load_manifest": {},
        "verify_manifest": {},
        "check_adapter": {"adapter_dir": tmp_path},
        "bind_adapter": {"adapter_dir": tmp_path, "key": None},
        "load_pinned": {"manifest": missing} if old != "manifest_path" else {},
        "load_pinned_dataset": {"name": "train"},
        "load_bound": {"adapter_dir": tmp_path},
    }[fn]
    value = tmp_path if new == "base_dir" else missing if new == "manifest" else object
    with pytest.warns(DeprecationWarning, match=rf"{fn}\({old}=\.\.\.\).*{fn}\({new}=\.\.\.\)"):
        # the call went through: the real function judged the (absent) input
        with pytest.raises(ftmanifest.InputNotFoundError):
            func(**args, **{old: value})


def test_the_old_keyword_reaches_the_function_unchanged() -> None:
    with pytest.warns(DeprecationWarning, match=f"goes in ftmanifest {REMOVED_IN}"):
        old = ftmanifest.load_manifest(path=MINIMAL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # control: the new keyword warns nothing
        new = ftmanifest.load_manifest(manifest=MINIMAL)
        positional = ftmanifest.load_manifest(MINIMAL)
    assert old.digest() == new.digest() == positional.digest()
    assert old.path == new.path == MINIMAL


def test_both_keywords_at_once_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="pass manifest= only"):
        ftmanifest.load_manifest(manifest=MINIMAL, path=MINIMAL)


def test_a_renamed_function_keeps_its_name_doc_and_type() -> None:
    @renamed_keywords(old="new")
    def echo(new: int) -> int:
        """Echo."""
        return new

    assert (echo.__name__, echo.__doc__) == ("echo", "Echo.")
    with pytest.warns(DeprecationWarning, match=r"echo\(old=\.\.\.\)"):
        assert echo(old=3) == 3  # type: ignore[call-arg]
    assert ftmanifest.verify_manifest.__name__ == "verify_manifest"
