"""``trust add``, ``keygen --trust``, ``sign`` without ``--key`` and ``lock`` after
signing: the first run of a new user
in a real git repository, through the CLI entry point."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from ftmanifest import cli
from ftmanifest.signing.trust import load_trust

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "manifests" / "docroute-lora-r16.yaml"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository as the current folder, HOME inside the test folder."""
    monkeypatch.delenv("FTMANIFEST_TRUST_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=30)
    monkeypatch.chdir(work / ".")
    return work


def keygen(path: Path, *extra: str) -> Path:
    assert cli.main(["keygen", "-f", str(path), "--no-passphrase", *extra]) == 0
    return path.with_name(path.name + ".pub")


def test_trust_add_writes_the_repository_trust_file(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pub = keygen(tmp_path / "keys" / "alice")
    (repo / "sub").mkdir()
    os.chdir(repo / "sub")  # the trust file goes to the repository root, wherever we are
    assert cli.main(["trust", "add", str(pub), "--principal", "alice@example.org"]) == 0
    trust = repo / ".ftmanifest" / "allowed_signers"
    line = trust.read_text().strip()
    assert line.startswith('alice@example.org namespaces="ftmanifest" ssh-ed25519 ')
    store = load_trust(trust)
    assert [k.principals for k in store.keys] == [("alice@example.org",)]
    assert stat.S_IMODE(trust.stat().st_mode) == 0o644
    assert not stat.S_IMODE(trust.parent.stat().st_mode) & 0o022
    out = capsys.readouterr().out
    assert str(trust) in out and "SHA256:" in out
    assert not list(trust.parent.glob(".allowed_signers.*"))  # no temp file left


def test_trust_add_appends_and_keeps_existing_lines(repo: Path, tmp_path: Path) -> None:
    alice = keygen(tmp_path / "keys" / "alice")
    bob = keygen(tmp_path / "keys" / "bob")
    trust = repo / ".ftmanifest" / "allowed_signers"
    trust.parent.mkdir(mode=0o755)
    trust.write_text("# reviewers\n")  # no principal yet, and no newline issue
    assert cli.main(["trust", "add", str(alice), "--principal", "alice@example.org"]) == 0
    assert cli.main(["trust", "add", str(bob), "--principal", "bob@example.org"]) == 0
    lines = trust.read_text().splitlines()
    assert lines[0] == "# reviewers"
    assert [k.principals[0] for k in load_trust(trust).keys] == [
        "alice@example.org",
        "bob@example.org",
    ]


def test_trust_add_refuses_a_duplicate_key(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pub = keygen(tmp_path / "keys" / "alice")
    assert cli.main(["trust", "add", str(pub), "--principal", "alice@example.org"]) == 0
    before = (repo / ".ftmanifest" / "allowed_signers").read_bytes()
    capsys.readouterr()
    assert cli.main(["trust", "add", str(pub), "--principal", "other@example.org"]) == 2
    err = capsys.readouterr().err
    assert "already" in err and "line 1" in err and "alice@example.org" in err
    assert "Traceback" not in err
    assert (repo / ".ftmanifest" / "allowed_signers").read_bytes() == before


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("not a key\n", "not an ssh-ed25519 public key"),
        ("ssh-ed25519 AAAA!!!!\n", "not an ssh-ed25519 public key"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", "private key"),
        ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ== x\n", "ssh-rsa"),
    ],
)
def test_trust_add_refuses_a_malformed_key(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    bad = tmp_path / "bad.pub"
    bad.write_text(content)
    assert cli.main(["trust", "add", str(bad), "--principal", "alice@example.org"]) == 2
    err = capsys.readouterr().err
    assert words in err and str(bad) in err and "Traceback" not in err
    assert "ftmanifest keygen" in err  # the fix
    assert not (repo / ".ftmanifest" / "allowed_signers").exists()


@pytest.mark.parametrize("principal", ["", "two words", 'quo"te', "a,b"])
def test_trust_add_refuses_a_principal_ssh_would_misread(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], principal: str
) -> None:
    pub = keygen(tmp_path / "keys" / "alice")
    assert cli.main(["trust", "add", str(pub), "--principal", principal]) == 2
    err = capsys.readouterr().err
    assert "--principal" in err and "Traceback" not in err
    assert not (repo / ".ftmanifest" / "allowed_signers").exists()


def test_trust_add_refuses_a_world_writable_folder(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pub = keygen(tmp_path / "keys" / "alice")
    folder = repo / ".ftmanifest"
    folder.mkdir()
    folder.chmod(0o777)
    assert cli.main(["trust", "add", str(pub), "--principal", "alice@example.org"]) == 1
    err = capsys.readouterr().err
    assert "chmod go-w" in err and str(folder) in err
    assert not (folder / "allowed_signers").exists()


def test_keygen_trust_adds_the_new_key(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keygen(tmp_path / "keys" / "alice", "--comment", "alice@example.org", "--trust")
    store = load_trust(repo / ".ftmanifest" / "allowed_signers")
    assert [k.principals for k in store.keys] == [("alice@example.org",)]
    assert "added" in capsys.readouterr().out


def test_keygen_trust_needs_a_principal_before_writing_a_key(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "keys" / "alice"
    assert cli.main(["keygen", "-f", str(path), "--no-passphrase", "--trust"]) == 2
    assert "--comment" in capsys.readouterr().err
    assert not path.exists()


def test_sign_uses_keygens_default_key(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["keygen", "--no-passphrase", "--comment", "me@example.org", "--trust"]) == 0
    assert (tmp_path / "home" / ".ftmanifest" / "id_ed25519").exists()
    shutil.copy(SOURCE, repo / "exp.yaml")
    assert cli.main(["sign", "exp.yaml"]) == 0
    assert (repo / "exp.yaml.sig.json").exists()
    assert cli.main(["signers", "exp.yaml"]) == 0


def test_sign_without_key_or_default_names_the_fix(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(SOURCE, repo / "exp.yaml")
    assert cli.main(["sign", "exp.yaml"]) == 2
    err = capsys.readouterr().err
    assert "id_ed25519" in err and "ftmanifest keygen" in err and "--key" in err


def test_lock_after_signing_says_replace(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keygen(tmp_path / "keys" / "alice")
    (repo / "train.jsonl").write_text('{"text": "a"}\n')
    (repo / "exp.yaml").write_text(
        "ftmanifest: 1\nexperiment: {id: e}\nmodel: {path: m}\n"
        "data:\n  - {name: train, role: train, path: train.jsonl, license: test}\n"
    )
    (repo / "m").mkdir()
    (repo / "m" / "config.json").write_text("{}")
    assert cli.main(["sign", "exp.yaml", "--key", str(tmp_path / "keys" / "alice")]) == 0
    capsys.readouterr()
    assert cli.main(["lock", "exp.yaml"]) == 0
    err = capsys.readouterr().err
    assert "ftmanifest sign exp.yaml --replace" in err
    assert "exp.yaml.sig.json" in err
