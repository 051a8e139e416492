"""A missing optional package is the user's to install, never a bug of ftmanifest.

Each command is run in a fresh interpreter where the package is hidden the way
an install without it behaves (``import X`` raises ``ModuleNotFoundError``
naming it); it must end with exit 2 and the exact install line, with no
traceback and no "internal error".  The Trainer guard must train a plain torch
dataset where ``datasets`` is not installed (an ``[ml]`` install).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ftmanifest.errors import EXIT_INPUT
from ftmanifest.examples.project import build_example
from ftmanifest.extras import INSTALL, install_line, missing_extra
from ftmanifest.verify.lock import lock_manifest
from tests.conftest import ENV, run_cli
from tests.support.pins import pin

# ``None`` in ``sys.modules`` is how CPython spells an absent module: ``import X``
# raises ModuleNotFoundError naming it and ``importlib.util.find_spec`` says None,
# as transformers' availability checks expect of a package that is not installed.
HIDER = textwrap.dedent(
    """\
    import os, sys

    for _name in filter(None, os.environ.get("FTM_TEST_HIDE", "").split(",")):
        sys.modules[_name] = None
    """
)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny example, locked once for the module."""
    manifest = build_example(tmp_path_factory.mktemp("example"), arch="llama", seed=0)
    lock_manifest(manifest)
    return manifest


@pytest.fixture(scope="module")
def hider(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hide")
    (folder / "sitecustomize.py").write_text(HIDER)
    return folder


def _without(hider: Path, *modules: str) -> dict[str, str]:
    return {**ENV, "PYTHONPATH": str(hider), "FTM_TEST_HIDE": ",".join(modules)}


def _assert_missing(proc: subprocess.CompletedProcess[str], module: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_INPUT, out
    assert "Traceback" not in out and "internal error" not in out, out
    assert f"optional package '{module}'" in out, out
    assert f"fix: {INSTALL[module]}" in out, out
    assert "reason: missing-extra" in out, out


def test_the_hider_really_hides(hider: Path) -> None:
    """The control: the mechanism hides torch from a real interpreter and nothing else."""
    code = "import json; import torch"
    env = _without(hider, "torch")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "ModuleNotFoundError" in proc.stderr and "torch" in proc.stderr
    proc = subprocess.run([sys.executable, "-c", "import json"], env=env, capture_output=True)
    assert proc.returncode == 0


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("torch", ["preflight", "{m}", "--only", "tokens", "--no-record"]),
        ("torch", ["preflight", "{m}", "--only", "step", "--no-record"]),
        ("transformers", ["plan", "{m}", "--days", "3", "--tokens-per-second", "50"]),
    ],
)
def test_a_command_without_its_extra_says_what_to_install(
    example: Path, hider: Path, module: str, args: list[str]
) -> None:
    argv = [a.replace("{m}", str(example)) for a in args]
    _assert_missing(run_cli(*argv, env=_without(hider, module)), module)
    json_run = run_cli(*argv, "--format", "json", env=_without(hider, module))
    assert json_run.returncode == EXIT_INPUT
    assert '"reason": "missing-extra"' in json_run.stdout


def test_with_the_extra_the_same_command_runs(example: Path) -> None:
    """The control: with torch importable, the same preflight is no missing-extra error."""
    proc = run_cli("preflight", str(example), "--only", "tokens", "--no-record", env=ENV)
    assert "missing-extra" not in proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), proc.stderr


def test_data_check_without_transformers_names_the_install_as_the_fix(
    example: Path, hider: Path
) -> None:
    proc = run_cli("data", "check", str(example), env=_without(hider, "transformers"))
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    at = out.index("data.length-unjudged")
    assert "fix:      pip install 'ftmanifest[ml]'" in out[at:]


def test_the_trainer_guard_trains_a_torch_dataset_without_datasets_installed(
    example: Path, hider: Path, tmp_path: Path
) -> None:
    """The demo's first training step in an ``[ml]`` install: ``datasets`` is absent.
    The hider is a ``sitecustomize`` on ``PYTHONPATH``, which the guard refuses unless
    the manifest pins both (as a user would)."""
    shutil.copytree(example.parent, tmp_path / "ex")
    example = pin(tmp_path / "ex" / example.name, allow=[str(hider)],
                  env_vars={"PYTHONPATH": str(hider)})  # fmt: skip
    script = textwrap.dedent(
        f"""\
        import sys
        from pathlib import Path
        from ftmanifest.examples.training import tiny_trainer
        from ftmanifest.integrations.transformers import FtManifestCallback
        m = Path({str(example)!r})
        guard = FtManifestCallback(m, signature=False)
        trainer = tiny_trainer(m.parent, Path({str(tmp_path / "out")!r}), [guard])
        trainer.train()
        assert sys.modules.get("datasets") is None
        print("steps", trainer.state.global_step)
        """
    )
    env = {**_without(hider, "datasets"), "FTMANIFEST_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-c", script], env={**__import__("os").environ, **env},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "steps 3" in proc.stdout


@pytest.mark.parametrize("module", sorted(INSTALL))
def test_every_optional_module_has_an_install_line(module: str) -> None:
    line = install_line(f"{module}.sub")
    assert line is not None and line.startswith("pip install ")
    err = missing_extra(ModuleNotFoundError(f"No module named {module!r}", name=module))
    assert err is not None and err.exit_code == EXIT_INPUT and err.hint == line


def test_a_broken_install_or_our_own_module_is_not_a_missing_extra() -> None:
    """Only an absent optional package is the user's to install: a missing module of
    ftmanifest's own is a bug, and an ImportError of an installed package is not absence."""
    assert missing_extra(ModuleNotFoundError("x", name="ftmanifest.nothing")) is None
    assert missing_extra(ImportError("cannot import name 'X' from 'torch'", name="torch")) is None
    assert missing_extra(ModuleNotFoundError("x")) is None
