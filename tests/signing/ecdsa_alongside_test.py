"""An ECDSA P-256 key counts beside an Ed25519 key: one manifest signed by both (keys
made, trusted and used through the real CLI) meets a threshold of two signers; one
signature alone does not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from signing_helpers import git_init

from ftmanifest import cli
from ftmanifest.manifest import load_manifest
from ftmanifest.signing import errors as E
from ftmanifest.signing.verify import verify_manifest_signature

SOURCE = Path(__file__).resolve().parents[2] / "manifests" / "docroute-lora-r16.yaml"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    git_init(tmp_path)
    (tmp_path / "manifests").mkdir()
    shutil.copy(SOURCE, tmp_path / "manifests" / "exp.yaml")
    for name, kind in (("ed", "ed25519"), ("ec", "ecdsa-p256")):
        key = tmp_path / "keys" / name
        argv = ["keygen", "-f", str(key), "--type", kind, "--no-passphrase", "-q"]
        assert cli.main(argv) == 0
    monkeypatch.chdir(tmp_path)
    for name in ("ed", "ec"):
        argv = ["trust", "add", f"keys/{name}.pub", "--principal", f"{name}@example.org"]
        assert cli.main(argv) == 0
    return tmp_path


def _verify(manifest: Path, threshold: int) -> object:
    canonical = load_manifest(manifest).canonical()
    return verify_manifest_signature(manifest, canonical, threshold=threshold)


def test_ed25519_and_ecdsa_signatures_meet_a_threshold_of_two(project: Path) -> None:
    manifest = project / "manifests" / "exp.yaml"
    assert cli.main(["sign", str(manifest), "--key", "keys/ed"]) == 0
    with pytest.raises(E.ThresholdNotMetError):  # one signer is not two
        _verify(manifest, 2)
    assert cli.main(["sign", str(manifest), "--key", "keys/ec"]) == 0
    report = _verify(manifest, 2)
    assert len(report.valid_keyids) == 2  # type: ignore[attr-defined]
    with pytest.raises(E.ThresholdNotMetError):  # two signers are not three
        _verify(manifest, 3)
