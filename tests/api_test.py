"""The public API: the package root names what users call, lazily."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import ftmanifest
from ftmanifest.cli.reference.api import _source, definition


def test_every_public_name_resolves_and_is_documented() -> None:
    assert ftmanifest.__all__[0] == "__version__" and len(ftmanifest.__all__) > 20
    for name, module in ftmanifest.PUBLIC.items():
        where, node = definition(module, name)
        assert node.name == name and where.startswith("ftmanifest")
        # its own docstring, not the signature a dataclass makes up
        assert (ast.get_docstring(node) or "").strip(), f"{name} has no docstring"


FRAMEWORKS = ("torch", "transformers", "peft", "datasets", "trl", "numpy")


def test_importing_the_package_imports_no_framework() -> None:
    # every name but the Trainer callback's room (a TrainerCallback subclass) stays light:
    # the result types and errors a caller catches cost no framework import
    code = (
        "import sys, ftmanifest\n"
        "for name, module in ftmanifest.PUBLIC.items():\n"
        "    if module != 'ftmanifest.integrations.transformers':\n"
        "        getattr(ftmanifest, name)\n"
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    # control: the callback's room does import transformers, and the check sees it
    code = (
        "import sys, ftmanifest\n"
        "ftmanifest.FtManifestCallback\n"
        "print('transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "True", out.stdout + out.stderr


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        ftmanifest.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_the_training_entry_points_are_the_integrations_own() -> None:
    from ftmanifest.integrations.transformers import FtManifestCallback, training_arguments

    assert ftmanifest.FtManifestCallback is FtManifestCallback
    assert ftmanifest.training_arguments is training_arguments


# --- the public API names its own types ----------------------------------------------

# Framework objects a function hands back as they are (a peft model, a transformers
# config...): typing them would make mypy read torch and transformers on every run.
FRAMEWORK_RESULTS = {
    "load_bound": "a peft.PeftModel",
    "load_pinned": "a transformers model and tokenizer",
    "load_pinned_dataset": "a datasets.Dataset",
    "training_arguments": "a transformers.TrainingArguments",
    "sft_config": "a trl.SFTConfig",
    "dpo_config": "a trl.DPOConfig",
    "lora_config": "a peft config",
}
ERROR_NAMED = re.compile(r"``(\w+Error)``")


def _origins(module: str) -> dict[str, str]:
    """Each name ``module`` defines or imports (at any depth), and the module it is from."""
    _path, tree = _source(module)
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
        elif isinstance(node, ast.ClassDef):
            found.setdefault(node.name, module)
    return found


def _named_types(annotation: ast.expr, origins: dict[str, str]) -> set[str]:
    """The ftmanifest classes an annotation names (``bases.BaseModel`` counts as ``BaseModel``)."""
    names = set()
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and origins.get(node.id, "").startswith("ftmanifest"):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if origins.get(node.value.id, "").startswith("ftmanifest"):
                names.add(node.attr)
    return names


def unexported(public: dict[str, str]) -> list[str]:
    """Every type a public function returns, and every error a public name documents
    or builds in its own body, that ``public`` does not export."""
    missing = []
    for name, module in public.items():
        where, node = definition(module, name)
        origins = _origins(where)
        needed = {e: "documents" for e in ERROR_NAMED.findall(ast.get_docstring(node) or "")}
        if isinstance(node, ast.FunctionDef):
            assert node.returns is not None, f"{name} has no return annotation"
            if name not in FRAMEWORK_RESULTS:
                assert "Any" not in ast.unparse(node.returns), f"{name} returns Any"
            needed |= dict.fromkeys(_named_types(node.returns, origins), "returns")
        for made in ast.walk(node):  # an error built in its own body: raised, or stopped with
            if isinstance(made, ast.Call) and ast.unparse(made.func).endswith("Error"):
                needed |= dict.fromkeys(_named_types(made.func, origins), "raises")
        missing += [f"{name} {how} {t}" for t, how in sorted(needed.items()) if t not in public]
    return missing


def test_every_result_and_error_of_the_public_api_is_exported() -> None:
    assert unexported(ftmanifest.PUBLIC) == []


def test_an_unexported_result_or_error_is_named() -> None:
    # the check reads the real signatures: drop a name and it is missed
    less = {k: v for k, v in ftmanifest.PUBLIC.items() if k not in ("AdapterReport", "UsageError")}
    missing = unexported(less)
    assert "check_adapter returns AdapterReport" in missing
    assert "load_bound raises UsageError" in missing  # raised in its own body
    assert "load_pinned documents UsageError" in missing  # named in its docstring
    less = {k: v for k, v in ftmanifest.PUBLIC.items() if k != "SnapshotNotFoundError"}
    assert unexported(less) == ["load_pinned documents SnapshotNotFoundError"]
    # the callback stops training with an error it builds (self._stop(state, ...))
    less = {k: v for k, v in ftmanifest.PUBLIC.items() if k != "StepRefusedError"}
    assert unexported(less) == ["FtManifestCallback raises StepRefusedError"]
