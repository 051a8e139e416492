"""A Hugging Face cache laid out on disk as huggingface_hub does it: lock resolves a
branch to its commit; pointing the revision at another snapshot is drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftmanifest.integrations.example import build_hub_cache
from ftmanifest.lock import lock_manifest
from ftmanifest.verify import verify_manifest
from tests.conftest import run_cli

MANIFEST = """\
ftmanifest: 1
experiment: {id: hub-exp}
model:
  repo: org/tiny
  revision: main   # lock pins the commit
data:
  - {name: train, role: train, path: train.jsonl, license: test}
"""


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    for folder, weights in ((v1, b"weights one" * 100), (v2, b"weights two" * 100)):
        folder.mkdir()
        (folder / "config.json").write_text('{"model_type": "llama"}')
        (folder / "model.safetensors").write_bytes(weights)
    cache = tmp_path / "hf-cache"
    commits = build_hub_cache(cache, "org/tiny", {"v1": v1, "v2": v2}, {"main": "v2"})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "ftm-cache"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.jsonl").write_text('{"text": "a"}\n')
    (work / "exp.yaml").write_text(MANIFEST)
    return work / "exp.yaml", commits


def test_lock_resolves_the_branch_through_the_cache_refs(hub: tuple[Path, dict[str, str]]) -> None:
    manifest, commits = hub
    result = lock_manifest(manifest)
    line = next(t for t in manifest.read_text().splitlines() if "revision:" in t)
    assert line.split("#")[0].split() == ["revision:", commits["v2"]]
    assert line.endswith("# lock pins the commit")
    assert any("resolved to" in note for note in result.notes)
    assert verify_manifest(manifest, signature=False).findings == []


def test_another_snapshot_is_drift_and_restoring_clears_it(
    hub: tuple[Path, dict[str, str]],
) -> None:
    manifest, commits = hub
    lock_manifest(manifest)
    locked = manifest.read_text()
    manifest.write_text(locked.replace(commits["v2"], commits["v1"]))
    report = verify_manifest(manifest, signature=False)
    assert [f.field for f in report.findings] == ["model.files[1]"]
    assert report.findings[0].message == "model file model.safetensors changed"
    manifest.write_text(locked)
    assert verify_manifest(manifest, signature=False).ok


def test_a_revision_missing_from_the_cache_is_drift(hub: tuple[Path, dict[str, str]]) -> None:
    manifest, commits = hub
    lock_manifest(manifest)
    manifest.write_text(manifest.read_text().replace(commits["v2"], "f" * 40))
    result = run_cli("verify", str(manifest), "--no-signature")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "model.revision" in result.stdout and "huggingface-cli download" in result.stdout
