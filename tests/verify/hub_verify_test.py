"""A Hugging Face cache laid out on disk as huggingface_hub does it: lock resolves a
branch to its commit; pointing the revision at another snapshot is drift."""

from __future__ import annotations

from pathlib import Path

from ftmanifest.verify import verify_manifest
from ftmanifest.verify.lock import lock_manifest
from tests.conftest import run_cli


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
