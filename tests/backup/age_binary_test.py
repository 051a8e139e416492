"""The reference ``age`` binary as the cipher, pyrage as the fallback.

Both implement age v1, so each one's archives must open with the other:
an archive the binary encrypted is decrypted by pyrage's bytes API (an
independent code path) and restored through the pyrage child; one the
pyrage child encrypted is decrypted by ``age -d`` and restored through the
binary.  Without the binary (PATH without it, or ``shutil.which`` finding
nothing) everything goes through pyrage.  Refusals read the same either way.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from ftmanifest.backup import agechild
from ftmanifest.backup.agechild import AgeChild, age_binary
from ftmanifest.backup.errors import DecryptFailedError, EncryptFailedError, WrongIdentityError
from ftmanifest.backup.index import INDEX_MEMBER
from ftmanifest.backup.keys import load_identities, parse_recipient
from tests.backup.conftest import AGE, backup, needs_age, restore_meta, tree_of


def _source(root: Path) -> Path:
    src = root / "run"
    (src / "ckpt").mkdir(parents=True)
    (src / "ckpt" / "weights.bin").write_bytes(os.urandom(300_000))
    (src / "empty").write_bytes(b"")
    (src / "train.log").write_bytes(b"loss 0.1\n" * 1000)
    return src


@pytest.fixture
def without_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine where ``age`` is not installed."""
    monkeypatch.setattr(agechild.shutil, "which", lambda name, *a, **k: None)


def _pyrage_plain(archive: Path, identity_path: Path) -> bytes:
    import pyrage

    identities = [i.to_age() for i in load_identities(identity_path)]
    return bytes(pyrage.decrypt(archive.read_bytes(), identities))


def _names(plain: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(plain), mode="r:") as tar:
        return [m.name for m in tar.getmembers()]


def _spawned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record the argv of every child AgeChild starts."""
    seen: list[list[str]] = []
    real = agechild.subprocess.Popen

    def popen(argv, *args, **kw):
        seen.append(list(argv))
        return real(argv, *args, **kw)

    monkeypatch.setattr(agechild.subprocess, "Popen", popen)
    return seen


@needs_age
def test_the_binary_is_used_when_installed(keys, tmp_path, monkeypatch):
    seen = _spawned(monkeypatch)
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)
    assert [argv[:2] for argv in seen] == [[AGE, "-e"], [AGE, "-d"]]
    decrypt = seen[1]
    assert decrypt[2] == "-i" and decrypt[3].startswith("/dev/fd/")  # the secret is not on argv
    assert not any("AGE-SECRET-KEY" in word for argv in seen for word in argv)


@needs_age
def test_binary_encrypted_archive_opens_with_pyrage(keys, tmp_path, monkeypatch):
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    plain = _pyrage_plain(created.archive, keys.identity_path)
    assert _names(plain)[0] == INDEX_MEMBER
    monkeypatch.setattr(agechild.shutil, "which", lambda name, *a, **k: None)
    seen = _spawned(monkeypatch)
    restore_meta(keys, created.meta_path, tmp_path / "dest")  # through the pyrage child
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)
    assert seen and all(AGE not in argv for argv in seen)


@needs_age
def test_pyrage_encrypted_archive_opens_with_the_binary(keys, tmp_path, monkeypatch):
    src = _source(tmp_path)
    with monkeypatch.context() as m:
        m.setattr(agechild.shutil, "which", lambda name, *a, **k: None)
        created = backup(keys, [src], tmp_path / "backups")
    done = subprocess.run(
        [AGE or "age", "-d", "-i", str(keys.identity_path), str(created.archive)],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert _names(done.stdout)[0] == INDEX_MEMBER
    seen = _spawned(monkeypatch)
    restore_meta(keys, created.meta_path, tmp_path / "dest")  # through the binary
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)
    assert [argv[:2] for argv in seen] == [[AGE, "-d"]]


def test_without_the_binary_pyrage_does_it_all(keys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert age_binary() is None
    seen = _spawned(monkeypatch)
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)
    assert [argv[3:5] for argv in seen] == [
        ["ftmanifest.backup.agechild", "encrypt"],
        ["ftmanifest.backup.agechild", "decrypt"],
    ]
    assert _names(_pyrage_plain(created.archive, keys.identity_path))[0] == INDEX_MEMBER


@pytest.mark.parametrize("cipher", ["binary", "pyrage"])
def test_refusals_read_the_same_with_either_cipher(keys, tmp_path, monkeypatch, cipher):
    if cipher == "binary" and AGE is None:
        pytest.skip("the age command line is not installed")
    if cipher == "pyrage":
        monkeypatch.setattr(agechild.shutil, "which", lambda name, *a, **k: None)
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    wrong = load_identities(keys.other_identity_path)
    with pytest.raises(WrongIdentityError):
        restore_meta(keys, created.meta_path, tmp_path / "dest", identities=wrong)
    with pytest.raises(EncryptFailedError) as caught:
        backup(keys, [_source(tmp_path / "again")], tmp_path / "b2", recipients=[_Plugin()])
    assert "not an X25519 or ssh recipient" in (caught.value.observed or "")
    assert not (tmp_path / "dest").exists()


class _Plugin:
    """A recipient text no cipher may get: a plugin recipient makes the
    binary run ``age-plugin-*`` from PATH."""

    text = "age1yubikey1qwertyuiopasdfghjklzxcvbnm"

    def to_dict(self) -> dict[str, str]:
        return {"type": "x25519", "fingerprint": self.text, "key": self.text}


@needs_age
def test_a_damaged_chunk_is_decrypt_failed_through_the_binary(keys, tmp_path):
    """The decryption refusal itself, below restore's archive digest check."""
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    data = bytearray(created.archive.read_bytes())
    data[-100] ^= 1
    damaged = tmp_path / "damaged.age"
    damaged.write_bytes(bytes(data))
    with damaged.open("rb") as fh:
        child = AgeChild("decrypt", fh.fileno(), identities=load_identities(keys.identity_path))
    assert child.stdout is not None
    while child.stdout.read(1 << 16):
        pass
    with pytest.raises(agechild.AgeChildError) as caught:
        child.wait()
    assert caught.value.kind == "age" and not caught.value.wrong_key
    from ftmanifest.backup.unpack import _decrypt_refusal

    assert isinstance(_decrypt_refusal(caught.value, damaged), DecryptFailedError)


@needs_age
def test_two_identities_each_through_its_own_pipe(keys, tmp_path):
    """The wrong key first, the right one second: the binary reads both."""
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    both = load_identities(keys.other_identity_path) + keys.identities()
    restore_meta(keys, created.meta_path, tmp_path / "dest", identities=both)
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


def _ssh_identity(tmp_path: Path) -> tuple[Path, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    path = tmp_path / "id_ed25519"
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    os.chmod(path, 0o600)
    pub = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return path, pub.decode()


@needs_age
@pytest.mark.parametrize("encrypt_with", ["binary", "pyrage"])
def test_ssh_ed25519_both_ways(keys, tmp_path, monkeypatch, encrypt_with):
    """ssh-ed25519 recipient and identity: encrypted by one cipher, restored by the other."""
    identity_path, pub = _ssh_identity(tmp_path)
    src = _source(tmp_path)
    with monkeypatch.context() as m:
        if encrypt_with == "pyrage":
            m.setattr(agechild.shutil, "which", lambda name, *a, **k: None)
        created = backup(keys, [src], tmp_path / "backups", recipients=[parse_recipient(pub)])
    if encrypt_with == "binary":
        monkeypatch.setattr(agechild.shutil, "which", lambda name, *a, **k: None)
    identities = load_identities(identity_path)
    restore_meta(keys, created.meta_path, tmp_path / "dest", identities=identities)
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


@needs_age
def test_passphrase_backup_goes_through_the_binary(keys, tmp_path, monkeypatch):
    """The archive is encrypted to the per-backup X25519 key, so the binary
    encrypts it although it reads passphrases only from a terminal; the key
    file itself stays pyrage's scrypt."""
    seen = _spawned(monkeypatch)
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups", passphrase="pw for the key file")
    assert created.key_path is not None
    identities = load_identities(
        created.key_path,
        lambda: "pw for the key file",
        sha256=created.meta.key_file_sha256,
    )
    restore_meta(keys, created.meta_path, tmp_path / "dest", identities=identities)
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)
    assert [argv[:2] for argv in seen] == [[AGE, "-e"], [AGE, "-d"]]


@pytest.mark.parametrize("cipher", ["binary", "pyrage"])
def test_the_signed_digest_is_the_archive_age_wrote(keys, tmp_path, monkeypatch, cipher):
    """age writes the archive straight into the temp file and the digest is
    taken behind it: the metadata must name exactly the bytes on disk, over
    many reads of the growing file (and the tail written after the last one)."""
    import hashlib

    if cipher == "binary" and AGE is None:
        pytest.skip("the age command line is not installed")
    if cipher == "pyrage":
        monkeypatch.setattr(agechild.shutil, "which", lambda name, *a, **k: None)
    from ftmanifest.backup import create

    monkeypatch.setattr(create, "PIPE_BYTES", 4096)  # a read behind age every 4 KiB
    real_child = create.AgeChild

    def child_that_ends_unseen(*args, **kw):
        """Whenever the hash catches up, age writes the rest and exits before
        it looks again: what it wrote after the last empty read must count."""
        child = real_child(*args, **kw)
        proc = child.proc
        proc.poll = lambda: proc.wait()  # type: ignore[method-assign]
        return child

    monkeypatch.setattr(create, "AgeChild", child_that_ends_unseen)
    src = _source(tmp_path)
    (src / "big.bin").write_bytes(os.urandom(3 << 20))
    created = backup(keys, [src], tmp_path / "backups")
    data = created.archive.read_bytes()
    assert created.meta.archive_size == len(data) > 3 << 20
    assert created.meta.archive_sha256 == hashlib.sha256(data).hexdigest()
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)
