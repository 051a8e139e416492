"""ECDSA P-256 keys beside Ed25519: keygen, trust add, sign, verify, refusals.

Through the real CLI entry point and real OpenSSH where it is installed.
"""

from __future__ import annotations

import base64
import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from signing_helpers import git_init

from ftmanifest import cli
from ftmanifest.manifest import load_manifest
from ftmanifest.manifest.canonical import canonical_json
from ftmanifest.signing import errors as E
from ftmanifest.signing.dsse import parse_envelope
from ftmanifest.signing.keys import fingerprint, load_private_key
from ftmanifest.signing.verify import verify_manifest_signature

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "manifests" / "docroute-lora-r16.yaml"
SSH_KEYGEN = shutil.which("ssh-keygen")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    git_init(tmp_path)
    (tmp_path / "manifests").mkdir()
    shutil.copy(SOURCE, tmp_path / "manifests" / "exp.yaml")
    return tmp_path


def _keygen(path: Path, *extra: str) -> None:
    assert cli.main(["keygen", "-f", str(path), "--no-passphrase", *extra]) == 0


def _verify(manifest: Path):
    return verify_manifest_signature(manifest, load_manifest(manifest).canonical())


def test_keygen_ecdsa_writes_pem_private_openssh_and_pem_public(tmp_path: Path, capsys) -> None:
    key = tmp_path / "keys" / "release"
    _keygen(key, "--type", "ecdsa-p256", "--comment", "rel@example.org", "--format", "json")
    out = json.loads(capsys.readouterr().out)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    pub_line = key.with_name("release.pub").read_text().split()
    assert pub_line[0] == "ecdsa-sha2-nistp256" and pub_line[2] == "rel@example.org"
    pem = key.with_name("release.pub.pem")
    public = serialization.load_pem_public_key(pem.read_bytes())
    assert isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == "secp256r1"
    loaded = load_private_key(key)
    assert isinstance(loaded, ec.EllipticCurvePrivateKey)
    assert fingerprint(loaded.public_key()) == fingerprint(public) == out["fingerprint"]
    assert out["type"] == "ecdsa-p256" and out["public_key_pem"] == str(pem)
    # the default stays Ed25519, in OpenSSH format, with no PEM beside it
    _keygen(tmp_path / "keys" / "plain")
    assert (tmp_path / "keys/plain.pub").read_text().startswith("ssh-ed25519 ")
    assert not (tmp_path / "keys/plain.pub.pem").exists()
    # a third file in the way refuses the whole pair, nothing written
    (tmp_path / "keys" / "x.pub.pem").write_text("")
    argv = ["keygen", "-f", str(tmp_path / "keys/x"), "--type", "ecdsa-p256", "--no-passphrase"]
    assert cli.main(argv) == 2
    assert "x.pub.pem" in capsys.readouterr().err
    assert not (tmp_path / "keys/x").exists()


def test_encrypted_ecdsa_key_needs_its_passphrase(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PW", "correct horse")
    key = tmp_path / "k"
    argv = ["keygen", "-f", str(key), "--type", "ecdsa-p256", "--passphrase-env", "PW"]
    assert cli.main(argv) == 0
    assert key.read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert isinstance(load_private_key(key, lambda: b"correct horse"), ec.EllipticCurvePrivateKey)
    with pytest.raises(E.BadPassphraseError):
        load_private_key(key, lambda: b"wrong")
    with pytest.raises(E.BadPassphraseError):
        load_private_key(key)


def test_ecdsa_sign_verify_round_trip_and_refusals(project: Path, monkeypatch) -> None:
    manifest = project / "manifests" / "exp.yaml"
    ec_key = project / "keys" / "ec"
    _keygen(ec_key, "--type", "ecdsa-p256")
    monkeypatch.chdir(project)
    trust_add = ["trust", "add", str(ec_key) + ".pub", "--principal", "ec@example.org"]
    assert cli.main(trust_add) == 0
    trust = (project / ".ftmanifest" / "allowed_signers").read_text()
    assert 'ec@example.org namespaces="ftmanifest" ecdsa-sha2-nistp256 ' in trust
    assert cli.main(["sign", str(manifest), "--key", str(ec_key)]) == 0
    report = _verify(manifest)
    assert report.valid_keyids == (fingerprint(load_private_key(ec_key).public_key()),)
    envelope = manifest.with_name("exp.yaml.sig.json")
    signed = envelope.read_bytes()
    sig = parse_envelope(signed, "env").signatures[0].sig
    assert sig[0] == 0x30 and len(sig) != 64  # DER, not Ed25519's 64 bytes

    # control passed; now one changed byte of the payload is refused
    doc = json.loads(signed)
    payload = bytearray(base64.b64decode(doc["payload"]))
    payload[payload.index(b"docroute")] ^= 1
    doc["payload"] = base64.b64encode(bytes(payload)).decode()
    envelope.write_bytes(canonical_json(doc) + b"\n")
    with pytest.raises(E.BadSignatureError):
        _verify(manifest)

    # an EC key that is not in the trust file is refused
    other = project / "keys" / "other"
    _keygen(other, "--type", "ecdsa-p256")
    assert cli.main(["sign", str(manifest), "--key", str(other), "--replace"]) == 0
    with pytest.raises(E.UnknownKeyError):
        _verify(manifest)


def test_trust_add_takes_a_pem_public_key_and_refuses_other_curves(
    project: Path, monkeypatch
) -> None:
    monkeypatch.chdir(project)
    pem = project / "publisher.pem"
    pub = ec.generate_private_key(ec.SECP256R1()).public_key()
    pem.write_bytes(
        pub.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    assert cli.main(["trust", "add", str(pem), "--principal", "models@example.org"]) == 0
    line = (project / ".ftmanifest" / "allowed_signers").read_text().strip()
    assert line.split()[2] == "ecdsa-sha2-nistp256"
    p384 = project / "p384.pem"
    p384.write_bytes(
        ec.generate_private_key(ec.SECP384R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    assert cli.main(["trust", "add", str(p384), "--principal", "x@example.org"]) == 2
    garbage = project / "bad.pem"
    garbage.write_text("-----BEGIN PUBLIC KEY-----\nnot base64!\n-----END PUBLIC KEY-----\n")
    assert cli.main(["trust", "add", str(garbage), "--principal", "x@example.org"]) == 2


def test_p384_private_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p384"
    path.write_bytes(
        ec.generate_private_key(ec.SECP384R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    with pytest.raises(E.UnsupportedKeyError, match="ECDSA P-256"):
        load_private_key(path)


@pytest.mark.skipif(SSH_KEYGEN is None, reason="ssh-keygen is not installed")
def test_ssh_keygen_reads_the_ecdsa_key_and_our_trust_line(project: Path, monkeypatch) -> None:
    """OpenSSH agrees on the fingerprint and verifies with the line trust add wrote."""
    assert SSH_KEYGEN is not None
    key = project / "k"
    _keygen(key, "--type", "ecdsa-p256")
    monkeypatch.chdir(project)
    assert cli.main(["trust", "add", f"{key}.pub", "--principal", "ec@example.org"]) == 0
    listed = subprocess.run(
        [SSH_KEYGEN, "-l", "-f", f"{key}.pub"], capture_output=True, text=True, check=True
    )
    assert fingerprint(load_private_key(key).public_key()) in listed.stdout
    message = project / "m"
    message.write_text("hello\n")
    subprocess.run(
        [SSH_KEYGEN, "-Y", "sign", "-n", "ftmanifest", "-f", str(key), str(message)],
        capture_output=True,
        check=True,
    )
    trust = project / ".ftmanifest" / "allowed_signers"
    verify = [SSH_KEYGEN, "-Y", "verify", "-f", str(trust), "-I", "ec@example.org"]
    verify += ["-n", "ftmanifest", "-s", f"{message}.sig"]
    ok = subprocess.run(verify, stdin=message.open("rb"), capture_output=True)
    assert ok.returncode == 0, ok.stderr
    message.write_text("hellp\n")
    bad = subprocess.run(verify, stdin=message.open("rb"), capture_output=True)
    assert bad.returncode != 0


def test_an_ecdsa_signer_is_not_a_backup_recipient(tmp_path: Path) -> None:
    """Backups are age files for ssh-ed25519 keys: an ECDSA line is skipped, named."""
    from ftmanifest.backup.keys import read_recipients_file

    _keygen(tmp_path / "ec", "--type", "ecdsa-p256")
    _keygen(tmp_path / "ed")
    lines = [
        f'ec@example.org namespaces="ftmanifest" {(tmp_path / "ec.pub").read_text().strip()}',
        f'ed@example.org namespaces="ftmanifest" {(tmp_path / "ed.pub").read_text().strip()}',
    ]
    signers = tmp_path / "allowed_signers"
    signers.write_text("\n".join(lines) + "\n")
    recipients, skipped = read_recipients_file(signers)
    assert len(recipients) == 1
    assert any("ecdsa-sha2-nistp256 keys cannot receive backups" in s for s in skipped)
