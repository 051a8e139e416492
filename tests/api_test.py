"""The public API: the package root names what users call, lazily."""

from __future__ import annotations

import subprocess
import sys

import ftmanifest
from ftmanifest.cli.reference.api import definition


def test_every_public_name_resolves_and_is_documented() -> None:
    assert ftmanifest.__all__[0] == "__version__" and len(ftmanifest.__all__) > 20
    for name, module in ftmanifest.PUBLIC.items():
        where, node = definition(module, name)
        assert node.name == name and where.startswith("ftmanifest")
        assert (getattr(ftmanifest, name).__doc__ or "").strip(), f"{name} has no docstring"


def test_importing_the_package_imports_no_framework() -> None:
    code = (
        "import sys, ftmanifest\n"
        "ftmanifest.verify_manifest, ftmanifest.Finding, ftmanifest.lint_paths\n"
        "print(sorted(m for m in ('torch', 'transformers', 'peft', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


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
