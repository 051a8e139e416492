"""The Trainer guard judges the process that trains: every module imported by
``on_train_begin`` (torch, transformers, the script's own), not only the manifest's files."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.transformers import RUN_RECORD, FtManifestCallback
from tests.integrations.trainer_guard_test import refused


@pytest.fixture
def unjudged_module(tmp_path: Path) -> Iterator[str]:
    """A module imported into this process from a folder nothing pins (removed afterwards,
    so later tests in the process do not see it)."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "ftm_unpinned_helper.py").write_text("MARK = 'ran from an unpinned folder'\n")
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module("ftm_unpinned_helper")
        assert module.MARK == "ran from an unpinned folder"
        yield str(folder / "ftm_unpinned_helper.py")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("ftm_unpinned_helper", None)


def test_a_module_from_an_unpinned_folder_refuses_training(
    example: Path, tmp_path: Path, unjudged_module: str
) -> None:
    guard = FtManifestCallback(example, signature=False)
    trainer = tiny_trainer(example.parent, tmp_path / "out", [guard])
    err = refused(trainer)
    rows = [f for f in err.report.findings if f.rule == "drift.module-unjudged"]
    assert [f.path for f in rows] == [unjudged_module]
    assert rows[0].field == "environment.interpreter.allow_paths" and rows[0].hint


def test_the_run_record_names_the_interpreter_judged(example: Path, tmp_path: Path) -> None:
    guard = FtManifestCallback(example, signature=False)
    out = tmp_path / "out"
    tiny_trainer(example.parent, out, [guard]).train()
    judged = json.loads((out / RUN_RECORD).read_text("utf-8"))["interpreter"]
    assert judged["executable"] == sys.executable
    # torch, transformers and their dependencies: each file against its RECORD
    assert judged["judged"]["record"] > 100 and judged["judged"]["stdlib"] > 50
