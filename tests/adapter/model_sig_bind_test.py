"""``bind`` with an ECDSA key also writes model.sig, checked by the real ``model_signing`` CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.cli import main
from ftmanifest.signing.keys import load_private_key
from tests.adapter.conftest import copy_tree, write_manifest

pytest.importorskip("model_signing")
MODEL_SIGNING = Path(sys.executable).with_name("model_signing")


def _project(models: dict[str, Path], tmp_path: Path) -> Path:
    project = tmp_path / "p"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=30)
    copy_tree(models["gpt2-a"], project / "base")
    copy_tree(models["gpt2-adapter"], project / "adapter")
    write_manifest(project, "base", "gpt2")
    return project


def _trust(project: Path, pub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    assert main(["trust", "add", str(pub), "--principal", "dev@example.org"]) == 0


def _model_signing_verify(adapter: Path, pem: Path) -> subprocess.CompletedProcess[str]:
    cli = [str(MODEL_SIGNING)] if MODEL_SIGNING.exists() else [shutil.which("model_signing") or ""]
    return subprocess.run(
        [*cli, "verify", "key", str(adapter), "--signature", str(adapter / "model.sig"),
         "--public_key", str(pem)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_ecdsa_bind_writes_a_model_sig_the_real_cli_verifies(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    project = _project(models, tmp_path)
    key = tmp_path / "keys" / "ec"
    monkeypatch.setenv("PW", "s3cret pass")
    argv = ["keygen", "-f", str(key), "--type", "ecdsa-p256", "--passphrase-env", "PW"]
    assert main(argv) == 0
    _trust(project, Path(f"{key}.pub"), monkeypatch)
    adapter, manifest = project / "adapter", project / "exp.json"
    bind = ["bind", str(adapter), "--manifest", str(manifest), "--key", str(key)]
    assert main([*bind, "--passphrase-env", "PW"]) == 0
    assert "model.sig:" in capsys.readouterr().out
    assert (adapter / "model.sig").is_file()
    # the ftmanifest binding verifies too, and lists model.sig among its subjects
    assert main(["check-adapter", str(adapter), "--manifest", str(manifest)]) == 0
    pem = Path(f"{key}.pub.pem")
    ok = _model_signing_verify(adapter, pem)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # another public key: refused
    assert main(["keygen", "-f", str(tmp_path / "other"), "--type", "ecdsa-p256",
                 "--no-passphrase"]) == 0  # fmt: skip
    assert _model_signing_verify(adapter, tmp_path / "other.pub.pem").returncode != 0
    # one byte of the adapter changes: refused
    weights = adapter / "adapter_config.json"
    data = bytearray(weights.read_bytes())
    data[-2] ^= 0x20
    weights.write_bytes(bytes(data))
    bad = _model_signing_verify(adapter, pem)
    assert bad.returncode != 0, bad.stdout
    # the private key loaded once, with the passphrase from the variable
    assert load_private_key(key, lambda: b"s3cret pass") is not None


def test_ed25519_bind_notes_that_model_sig_is_not_written(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    project = _project(models, tmp_path)
    key = tmp_path / "ed"
    assert main(["keygen", "-f", str(key), "--no-passphrase"]) == 0
    _trust(project, Path(f"{key}.pub"), monkeypatch)
    adapter = project / "adapter"
    argv = ["bind", str(adapter), "--manifest", str(project / "exp.json"), "--key", str(key)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "note:" in out and "model.sig not written" in out and "elliptic-curve" in out
    assert not (adapter / "model.sig").exists()


def test_binding_again_with_a_relative_path_keeps_model_sig_valid(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adapter bound once (its envelope already there), bound again by a relative
    path: model.sig must leave the envelope out, which bind then rewrites."""
    project = _project(models, tmp_path)
    key = tmp_path / "keys" / "ec"
    assert main(["keygen", "-f", str(key), "--type", "ecdsa-p256", "--no-passphrase"]) == 0
    _trust(project, Path(f"{key}.pub"), monkeypatch)  # also changes into the project
    bind = ["bind", "adapter", "--manifest", "exp.json", "--key", str(key)]
    assert main(bind) == 0
    assert main(bind) == 0  # the envelope of the first bind is in the folder now
    ok = _model_signing_verify(project / "adapter", Path(f"{key}.pub.pem"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
