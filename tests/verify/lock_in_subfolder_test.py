"""A manifest in manifests/ reaches the model and data at the repository root.

``ftmanifest init manifests/exp.yaml --from model data/...`` writes ``../model``
and ``../data/...`` (paths are relative to the manifest's folder); lock, lint and
verify take them, because they stay inside the git repository holding the
manifest.  A path that leaves the repository (``..``, a symlink in a data
folder) is still refused, and outside any repository the manifest's folder is
the bound, as before.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.errors import InputError
from ftmanifest.lint import lint_paths
from ftmanifest.manifest.edit import apply_yaml
from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.conftest import ENV, git

FILLED: dict[tuple[Any, ...], Any] = {
    ("experiment", "task"): "generation",
    ("experiment", "hypothesis"): "answers keep the house format more often than the base",
    ("experiment", "guards"): [{"kind": "format_validity", "format": "json", "min_rate": 0.95}],
    ("model", "license"): "apache-2.0",
    ("model", "terms_accepted"): True,
    ("method", "kind"): "full",
    ("training", "grad_accum"): 1,
    ("training", "loss_normalization"): "per-token",
    ("seeds", "python"): 1,
    ("seeds", "numpy"): 1,
    ("seeds", "torch"): 1,
    ("seeds", "data_order"): 1,
    ("security", "retention"): {"checkpoints": "30d", "logs": "90d", "raw_data": "180d"},
    ("environment", "lock", "path"): "../requirements.lock",
    **{
        ("data", i, key): value
        for i in (0, 1)
        for key, value in (("license", "CC-BY-4.0"), ("contains_personal_data", False))
    },
    ("data", 0, "role"): "train",
    ("data", 1, "sealed"): True,
}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository: a model folder and data at its root, an empty manifests/."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "repo"
    (root / "model").mkdir(parents=True)
    (root / "model" / "config.json").write_text('{"model_type": "llama"}\n')
    (root / "model" / "model.safetensors").write_bytes(b"weights" * 64)
    (root / "data" / "shards").mkdir(parents=True)
    (root / "data" / "shards" / "a.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    (root / "data" / "test.jsonl").write_text('{"text": "c"}\n')
    (root / "requirements.lock").write_text("ftmanifest==0.1.0\n")
    (root / "train.py").write_text("print('train')\n")
    (root / "manifests").mkdir()
    git(root, "init", "-q")
    return root


def _init_fill_commit(root: Path) -> Path:
    from ftmanifest.cli import main

    manifest = root / "manifests" / "exp.yaml"
    cwd = os.getcwd()
    os.chdir(root)  # as a user types it, from the repository root
    try:
        rc = main(
            ["init", "manifests/exp.yaml", "--from", "model", "data/shards", "data/test.jsonl"]
        )
    finally:
        os.chdir(cwd)
    assert rc == 0
    text = manifest.read_text()
    assert 'path: "../model"' in text and 'path: "../data/shards"' in text
    manifest.write_text(apply_yaml(text, list(FILLED.items())))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "experiment")
    return manifest


def test_init_in_manifests_then_lock_lint_and_verify_pass(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _init_fill_commit(repo)
    assert "outside the manifest's" not in capsys.readouterr().err  # no warning from init
    lock_manifest(manifest)
    git(repo, "commit", "-qam", "locked")
    findings, unusable = lint_paths([str(manifest)])
    assert unusable == 0 and findings == [], "\n".join(f"{f.rule} {f.message}" for f in findings)
    report = verify_manifest(manifest, signature=False)
    assert [f for f in report.findings if f.severity == "error"] == []


def test_a_symlink_in_a_data_folder_may_lead_anywhere_inside_the_repository(repo: Path) -> None:
    (repo / "data" / "shards" / "b.jsonl").symlink_to("../test.jsonl")
    manifest = _init_fill_commit(repo)
    assert lock_manifest(manifest).changed


@pytest.mark.parametrize("how", ["dotdot", "symlink-in-folder", "symlinked-file"])
def test_a_path_that_leaves_the_repository_is_refused(repo: Path, how: str) -> None:
    outside = repo.parent / "secret.jsonl"
    outside.write_text('{"text": "not yours"}\n')
    manifest = _init_fill_commit(repo)
    if how == "dotdot":
        manifest.write_text(
            manifest.read_text().replace('"../data/test.jsonl"', '"../../secret.jsonl"')
        )
    elif how == "symlink-in-folder":
        (repo / "data" / "shards" / "b.jsonl").symlink_to(outside)
    else:
        (repo / "data" / "test.jsonl").unlink()
        (repo / "data" / "test.jsonl").symlink_to(outside)
    with pytest.raises(InputError) as caught:
        lock_manifest(manifest)
    said = caught.value.message
    assert str(outside) in said, said  # where it leads is named
    assert "leaves the manifest's repository" in said or f"resolves outside {repo}" in said
    if how != "symlink-in-folder":  # a link inside a data folder stays bound even so
        lock_manifest(manifest, allow_outside=True)  # the flag lifts the bound


def test_outside_any_repository_the_manifests_folder_is_the_bound(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ftmanifest.cli import main

    manifest = _init_fill_commit(repo)
    (repo / ".git").rename(repo / "not-git")  # the same files, in no repository
    capsys.readouterr()
    assert main(["init", str(repo / "manifests" / "b.yaml"), "--from", str(repo / "data")]) == 0
    assert "../data lies outside the manifest's folder" in capsys.readouterr().err
    with pytest.raises(InputError) as caught:
        lock_manifest(manifest)
    assert "leaves the manifest's folder" in caught.value.message
    assert "git repository" in (caught.value.hint or "")
