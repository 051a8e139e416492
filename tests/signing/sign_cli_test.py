"""keygen / sign / signers through the real CLI entry point, on real manifests."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest
from signing_helpers import git_init

from ftmanifest import cli
from ftmanifest.manifest import load_manifest
from ftmanifest.signing.verify import verify_manifest_signature

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "manifests" / "docroute-lora-r16.yaml"


@pytest.fixture(autouse=True)
def _registered(monkeypatch: pytest.MonkeyPatch) -> None:
    # Until the lead adds them to COMMANDS, register our three subcommands here.
    for name in ("keygen", "sign", "signers"):
        monkeypatch.setitem(cli.COMMANDS, name, name)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repo with one example manifest; keys for alice (encrypted) and bob."""
    git_init(tmp_path)
    (tmp_path / "manifests").mkdir()
    shutil.copy(SOURCE, tmp_path / "manifests" / "exp.yaml")
    monkeypatch.setenv("ALICE_PW", "correct horse battery")
    assert (
        cli.main(
            [
                "keygen",
                "-f",
                str(tmp_path / "keys/alice"),
                "--passphrase-env",
                "ALICE_PW",
                "--comment",
                "alice@example.org",
            ]
        )
        == 0
    )
    assert cli.main(["keygen", "-f", str(tmp_path / "keys/bob"), "--no-passphrase"]) == 0
    return tmp_path


def trust(project: Path, *names: str, options: str = 'namespaces="ftmanifest"') -> None:
    lines = []
    for name in names:
        pub = (project / "keys" / f"{name}.pub").read_text().split()
        lines.append(f"{name}@example.org {options} {pub[0]} {pub[1]}")
    path = project / ".ftmanifest" / "allowed_signers"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def sign(project: Path, name: str, *extra: str) -> int:
    args = ["sign", str(project / "manifests/exp.yaml"), "--key", str(project / "keys" / name)]
    if name == "alice":
        args += ["--passphrase-env", "ALICE_PW"]
    return cli.main([*args, *extra])


def signers(project: Path, *extra: str) -> int:
    return cli.main(["signers", str(project / "manifests/exp.yaml"), *extra])


def test_keygen_output_and_modes(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert stat.S_IMODE((project / "keys/alice").stat().st_mode) == 0o600
    key = str(project / "keys/carol")
    assert cli.main(["keygen", "-f", key, "--passphrase-env", "ALICE_PW", "--comment", "c@x"]) == 0
    out = capsys.readouterr().out
    assert 'c@x namespaces="ftmanifest" ssh-ed25519 AAAA' in out and "(encrypted)" in out
    assert "correct horse" not in out  # never print a secret
    assert cli.main(["keygen", "-f", str(project / "keys/bob"), "--no-passphrase"]) == 2


def test_sign_then_signers_author_and_reviewer(project: Path, capsys) -> None:
    trust(project, "alice", "bob")
    assert sign(project, "alice") == 0
    assert sign(project, "alice") == 0  # idempotent
    assert "already signed" in capsys.readouterr().out
    assert signers(project, "--threshold", "2") == 1
    assert "threshold-not-met" in capsys.readouterr().err
    assert sign(project, "bob") == 0
    assert "added a signature" in capsys.readouterr().out
    assert signers(project, "--threshold", "2", "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True
    assert [(s["principals"], s["status"], s["verifies"]) for s in doc["signatures"]] == [
        (["alice@example.org"], "valid", True),
        (["bob@example.org"], "valid", True),
    ]


def test_comment_edit_stays_valid_value_edit_refused(project: Path, capsys) -> None:
    trust(project, "alice")
    assert sign(project, "alice") == 0
    m = project / "manifests/exp.yaml"
    text = m.read_text()
    m.write_text("# reviewed by bob\n" + text.replace("# every department", "# each dept"))
    report = verify_manifest_signature(m, load_manifest(m).canonical())
    assert len(report.valid_keyids) == 1
    assert signers(project) == 0
    m.write_text(text.replace("r: 16", "r: 32"))
    capsys.readouterr()
    assert signers(project) == 1
    err = capsys.readouterr().err
    assert "manifest values changed after signing: method.r" in err
    # Signing the changed manifest refuses until --replace.
    assert sign(project, "bob") == 1
    assert "--replace" in capsys.readouterr().err
    assert sign(project, "alice", "--replace") == 0
    assert signers(project) == 0


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda p: trust(p, "bob"), "unknown-key"),  # alice revoked: her line removed
        (lambda p: trust(p, "alice", options='namespaces="git"'), "wrong-namespace"),
        (
            lambda p: trust(p, "alice", options='namespaces="ftmanifest",valid-before="20200101Z"'),
            "expired-key",
        ),
        (
            lambda p: trust(p, "alice", options='namespaces="ftmanifest",valid-after="29990101Z"'),
            "not-yet-valid",
        ),
    ],
)
def test_trust_refusals_exit_1_with_their_own_reason(project: Path, capsys, setup, reason) -> None:
    trust(project, "alice")
    assert sign(project, "alice") == 0
    setup(project)
    capsys.readouterr()
    assert signers(project, "--format", "json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"]["reason"] == reason and doc["error"]["exit_code"] == 1


def test_cli_input_errors(project: Path, capsys, monkeypatch) -> None:
    trust(project, "alice")
    (project / "keys/bob").chmod(0o644)
    assert sign(project, "bob") == 1
    assert "chmod 600" in capsys.readouterr().err
    monkeypatch.setenv("ALICE_PW", "wrong")
    assert sign(project, "alice") == 2
    assert "wrong passphrase" in capsys.readouterr().err
    monkeypatch.delenv("ALICE_PW")
    assert sign(project, "alice") == 2
    assert "ALICE_PW" in capsys.readouterr().err
    assert signers(project) == 1  # unsigned
    assert "not signed" in capsys.readouterr().err
