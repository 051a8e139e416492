"""Keys: OpenSSH-format Ed25519 generation and loading, permissions, fingerprints."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from ftmanifest.signing import errors as E
from ftmanifest.signing.keys import (
    fingerprint,
    generate_key_pair,
    load_private_key,
    public_key_blob,
    public_key_from_blob,
)

SSH_KEYGEN = shutil.which("ssh-keygen")
needs_ssh_keygen = pytest.mark.skipif(SSH_KEYGEN is None, reason="ssh-keygen not installed")


def test_generate_writes_0600_private_and_public_key(tmp_path) -> None:
    path = tmp_path / "sub" / "id_ed25519"
    fp = generate_key_pair(path, comment="alice@example.org")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    pub = path.with_name("id_ed25519.pub").read_text()
    assert pub.startswith("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5") and pub.endswith(
        " alice@example.org\n"
    )
    key = load_private_key(path)
    assert fingerprint(key.public_key()) == fp
    assert b"BEGIN OPENSSH PRIVATE KEY" in path.read_bytes()


def test_generate_refuses_to_overwrite(tmp_path) -> None:
    path = tmp_path / "k"
    generate_key_pair(path)
    before = path.read_bytes()
    with pytest.raises(E.KeyExistsError):
        generate_key_pair(path)
    assert path.read_bytes() == before
    path.unlink()
    with pytest.raises(E.KeyExistsError):  # the .pub alone still blocks
        generate_key_pair(path)


def test_encrypted_key_needs_the_right_passphrase(tmp_path) -> None:
    path = tmp_path / "k"
    fp = generate_key_pair(path, passphrase=b"correct horse")
    asked: list[int] = []

    def ask() -> bytes:
        asked.append(1)
        return b"correct horse"

    assert fingerprint(load_private_key(path, ask).public_key()) == fp
    assert asked == [1]
    with pytest.raises(E.BadPassphraseError, match="wrong passphrase"):
        load_private_key(path, lambda: b"wrong")
    with pytest.raises(E.BadPassphraseError, match="no passphrase"):
        load_private_key(path)
    # An unencrypted key never asks.
    generate_key_pair(tmp_path / "plain")
    load_private_key(tmp_path / "plain", lambda: pytest.fail("asked"))  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_group_or_world_readable_key_is_refused(tmp_path, mode) -> None:
    path = tmp_path / "k"
    generate_key_pair(path)
    os.chmod(path, mode)
    with pytest.raises(E.InsecureKeyPermissionsError) as info:
        load_private_key(path)
    assert info.value.hint == f"chmod 600 {path}"
    assert info.value.observed == f"mode {mode:04o}" and info.value.exit_code == 1


def test_non_ed25519_and_garbage_keys_are_refused(tmp_path) -> None:
    # ECDSA P-256 signs too (ecdsa_keys_test); another curve is refused
    ecdsa = ec.generate_private_key(ec.SECP384R1())
    path = tmp_path / "ecdsa"
    path.write_bytes(
        ecdsa.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    with pytest.raises(E.UnsupportedKeyError, match="only Ed25519 and ECDSA P-256"):
        load_private_key(path)
    junk = tmp_path / "junk"
    junk.write_text("not a key\n")
    junk.chmod(0o600)
    with pytest.raises(E.MalformedKeyError):
        load_private_key(junk)
    with pytest.raises(E.KeyNotFoundError):
        load_private_key(tmp_path / "missing")


def test_blob_round_trip_and_refusals() -> None:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    blob = public_key_blob(key)
    assert public_key_from_blob(blob) == key
    for bad in (blob[:-1], blob + b"\0", blob.replace(b"ssh-ed25519", b"ssh-ed25518"), b""):
        with pytest.raises(ValueError):
            public_key_from_blob(bad)


@needs_ssh_keygen
def test_keys_made_by_ssh_keygen_load_and_fingerprints_agree(tmp_path) -> None:
    for name, passphrase in (("plain", ""), ("enc", "s3cret pass")):
        path = tmp_path / name
        subprocess.run(
            [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", passphrase, "-C", "bob@x", "-f", str(path)],
            check=True,
            capture_output=True,
        )
        key = load_private_key(path, lambda p=passphrase: p.encode())
        listed = subprocess.run(
            [SSH_KEYGEN, "-l", "-f", f"{path}.pub"], check=True, capture_output=True, text=True
        ).stdout.split()
        assert listed[1] == fingerprint(key.public_key())


@needs_ssh_keygen
def test_ssh_keygen_reads_our_keys(tmp_path) -> None:
    path = tmp_path / "ours"
    fp = generate_key_pair(path, passphrase=b"pw")
    out = subprocess.run(
        [SSH_KEYGEN, "-y", "-P", "pw", "-f", str(path)], check=True, capture_output=True, text=True
    ).stdout
    assert out.split()[:2] == path.with_name("ours.pub").read_text().split()[:2]
    listed = subprocess.run(
        [SSH_KEYGEN, "-l", "-f", str(path) + ".pub"], check=True, capture_output=True, text=True
    )
    assert listed.stdout.split()[1] == fp
