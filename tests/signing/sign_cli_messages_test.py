"""The command line: the signing commands' messages and mistakes.

Through the real CLI entry point, with real keys, manifests and folders.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from signing_helpers import git_init

from ftmanifest import cli

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "manifests" / "docroute-lora-r16.yaml"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    git_init(tmp_path)
    (tmp_path / "manifests").mkdir()
    shutil.copy(SOURCE, tmp_path / "manifests" / "exp.yaml")
    monkeypatch.setenv("ALICE_PW", "correct horse battery")
    assert (
        cli.main(["keygen", "-f", str(tmp_path / "keys/alice"), "--passphrase-env", "ALICE_PW"])
        == 0
    )
    assert cli.main(["keygen", "-f", str(tmp_path / "keys/bob"), "--no-passphrase"]) == 0
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("value", ["correct horse", "s3cr3t!", "hunter2-x", "secret"])
def test_passphrase_env_never_echoes_a_value(project: Path, capsys, value: str) -> None:
    m, key = str(project / "manifests/exp.yaml"), str(project / "keys/alice")
    code, text = run(capsys, "sign", m, "--key", key, "--passphrase-env", value)
    assert code == 2 and "--passphrase-env" in text
    for part in value.split():
        assert part not in text
    code, text = run(capsys, "keygen", "-f", str(project / "keys/x"), "--passphrase-env", value)
    assert code == 2
    for part in value.split():
        assert part not in text
    assert not (project / "keys/x").exists()


def test_passphrase_env_names_a_conventional_variable(project: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("ALICE_PW")
    m, key = str(project / "manifests/exp.yaml"), str(project / "keys/alice")
    code, text = run(capsys, "sign", m, "--key", key, "--passphrase-env", "ALICE_PW")
    assert code == 2 and "environment variable ALICE_PW is not set" in text


def test_empty_passphrase_is_a_passphrase_error(project: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("ALICE_PW", "")
    m, key = str(project / "manifests/exp.yaml"), str(project / "keys/alice")
    code, text = run(capsys, "sign", m, "--key", key, "--passphrase-env", "ALICE_PW")
    assert code == 2 and "empty passphrase" in text and "bad-passphrase" in text
    assert "malformed" not in text


def test_signers_on_a_missing_manifest_is_not_found(project: Path, capsys) -> None:
    code, text = run(capsys, "signers", str(project / "manifests/nope.yaml"))
    assert code == 2 and "not found" in text and "not signed" not in text


def test_sign_with_the_public_key_says_so(project: Path, capsys) -> None:
    m, pub = str(project / "manifests/exp.yaml"), str(project / "keys/bob.pub")
    code, text = run(capsys, "sign", m, "--key", pub)
    assert code == 2 and "this is a public key" in text and "chmod" not in text
    assert f"--key {project / 'keys/bob'}" in text


@pytest.mark.parametrize("where", ["parent is a file", "missing folder under a file"])
def test_keygen_write_failures_are_exit_2(project: Path, capsys, where: str) -> None:
    blocker = project / "afile"
    blocker.write_text("")
    target = blocker / "key" if where == "parent is a file" else blocker / "sub" / "key"
    code, text = run(capsys, "keygen", "-f", str(target), "--no-passphrase")
    assert code == 2 and "cannot write the private key" in text and "internal error" not in text


def test_keygen_into_a_read_only_folder_is_exit_2(project: Path, capsys) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    ro = project / "ro"
    ro.mkdir(mode=0o555)
    code, text = run(capsys, "keygen", "-f", str(ro / "key"), "--no-passphrase")
    assert code == 2 and "cannot write" in text


def test_sign_into_a_read_only_folder_is_exit_2(project: Path, capsys) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = project / "manifests"
    folder.chmod(0o555)
    try:
        code, text = run(
            capsys, "sign", str(folder / "exp.yaml"), "--key", str(project / "keys/bob")
        )
    finally:
        folder.chmod(0o755)
    assert code == 2 and "cannot write the signature envelope" in text


def test_a_folder_as_key_trust_or_envelope_is_exit_2(project: Path, capsys) -> None:
    m = project / "manifests/exp.yaml"
    code, text = run(capsys, "sign", str(m), "--key", str(project / "keys"))
    assert code == 2 and "is a folder" in text
    assert run(capsys, "sign", str(m), "--key", str(project / "keys/bob"))[0] == 0
    code, text = run(capsys, "signers", str(m), "--trust", str(project / "keys"))
    assert code == 2 and "not-regular-file" in text
    envelope = m.with_name("exp.yaml.sig.json")
    envelope.unlink()
    envelope.mkdir()
    for argv in (["signers", str(m)], ["sign", str(m), "--key", str(project / "keys/bob")]):
        code, text = run(capsys, *argv)
        assert code == 2 and "internal error" not in text
    code, text = run(capsys, "sign", str(m), "--key", str(project / "keys/bob"), "--replace")
    assert code == 2 and "internal error" not in text
