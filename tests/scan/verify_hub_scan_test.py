"""verify's policy scan reads a pinned hub snapshot's files, not only a local model folder
(issue 9, item 7)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from ftmanifest.integrations.example import build_hub_cache
from ftmanifest.lock import lock_manifest
from ftmanifest.verify import verify_manifest
from tests.conftest import HUB_MANIFEST

POLICY = "security:\n  scan: {on: [verify], pickles: true, secrets: true, pii: false}\n"


class _Gadget:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return (os.system, ("echo owned",))


@pytest.fixture
def hub_with_pickles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, dict[str, str]]:
    good, bad = tmp_path / "good", tmp_path / "bad"
    for folder, payload in ((good, {"w": [1.0, 2.0]}), (bad, {"w": _Gadget()})):
        folder.mkdir()
        (folder / "config.json").write_text('{"model_type": "llama"}')
        (folder / "pytorch_model.bin").write_bytes(pickle.dumps(payload, protocol=2))
    cache = tmp_path / "hf-cache"
    commits = build_hub_cache(cache, "org/tiny", {"good": good, "bad": bad}, {"main": "good"})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "ftm-cache"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.jsonl").write_text('{"text": "a"}\n')
    (work / "exp.yaml").write_text(HUB_MANIFEST + POLICY)
    return work / "exp.yaml", commits


def test_a_gadget_in_the_pinned_snapshot_is_refused(
    hub_with_pickles: tuple[Path, dict[str, str]],
) -> None:
    manifest, commits = hub_with_pickles
    lock_manifest(manifest)
    assert verify_manifest(manifest, signature=False).ok  # the good snapshot scans clean
    manifest.write_text(manifest.read_text().replace(commits["good"], commits["bad"]))
    lock_manifest(manifest)  # pinned, digests and all, onto a snapshot whose weights are a gadget
    assert verify_manifest(manifest, signature=False, scan=False).ok
    report = verify_manifest(manifest, signature=False)
    rows = [f for f in report.findings if f.kind == "unsafe-pickle"]
    assert rows and rows[0].path and rows[0].path.endswith("pytorch_model.bin")
    assert not report.ok
