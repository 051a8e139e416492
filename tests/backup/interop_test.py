"""Backups are plain age + PAX tar: other tools read ours, we read theirs.

The real ``age`` command line and GNU ``tar`` (those tests skip without
``age``), ``ssh-keygen`` keys as recipients and identities, and
independent code paths: pyrage's bytes API and the standard library's
``tarfile`` instead of the streaming reader restore uses.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from ftmanifest.backup.index import DIGESTS_MEMBER, INDEX_MEMBER, build
from ftmanifest.cli import main
from ftmanifest.signing.keys import public_key_line
from tests.backup.conftest import (
    backup,
    needs_age,
    resign,
    restore_meta,
    sha256_of,
    signed_index,
    tree_of,
    write_backup,
)


def _source(root: Path) -> Path:
    src = root / "run"
    (src / "ckpt" / "é").mkdir(parents=True)
    (src / "ckpt" / "weights.bin").write_bytes(os.urandom(200_000))
    (src / "ckpt" / "é" / "中文 🚀.txt").write_text("hé\n", encoding="utf-8")
    (src / "empty").write_bytes(b"")
    (src / "train.log").write_bytes(b"loss 0.1\n" * 1000)
    os.chmod(src / "train.log", 0o600)
    os.chmod(src / "ckpt", 0o750)
    return src


def _files(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every regular file under ``root``."""
    return {k: v[2] for k, v in tree_of(root).items() if v[0] == "file"}


def _prefixed(src: Path) -> dict[str, str]:
    return {f"{src.name}/{k}": v for k, v in _files(src).items()}


def _age(*args: str, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(["age", *args], input=stdin, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def _tar_names(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return [m.name for m in tar.getmembers()]


@needs_age
def test_age_cli_and_gnu_tar_read_our_archive(keys, tmp_path):
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    age = subprocess.Popen(
        ["age", "-d", "-i", str(keys.identity_path), str(created.archive)], stdout=subprocess.PIPE
    )
    listing = subprocess.run(["tar", "-t"], stdin=age.stdout, capture_output=True, timeout=60)
    assert age.stdout is not None
    age.stdout.close()
    assert age.wait(timeout=60) == 0 and listing.returncode == 0, listing.stderr
    names = [n.rstrip("/") for n in listing.stdout.decode("utf-8").splitlines()]
    assert names[0] == INDEX_MEMBER and names[-1] == DIGESTS_MEMBER
    assert set(names[1:-1]) == {"run", "run/ckpt", "run/ckpt/é"} | set(_prefixed(src))

    plain = tmp_path / "plain.tar"
    _age("-d", "-i", str(keys.identity_path), "-o", str(plain), str(created.archive))
    out = tmp_path / "extracted"
    out.mkdir()
    subprocess.run(["tar", "-x", "-f", str(plain), "-C", str(out)], check=True, timeout=60)
    assert sha256_of(out / INDEX_MEMBER) == created.meta.index_sha256
    assert tree_of(out / "run") == tree_of(src)
    # The last member: each file's sha256 in member order, as the metadata signs it.
    digests = (out / DIGESTS_MEMBER).read_bytes()
    assert sha256_of(out / DIGESTS_MEMBER) == created.meta.file_digests_sha256
    files = [n for n in names[1:-1] if (out / n).is_file()]
    assert digests == b"".join(bytes.fromhex(sha256_of(out / n)) for n in files)


def test_pyrage_bytes_api_and_tarfile_read_our_archive(keys, tmp_path):
    """Independent of the streaming reader: whole-buffer decrypt, stdlib tar parse."""
    import pyrage

    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    (identity,) = keys.identities()
    plain = pyrage.decrypt(created.archive.read_bytes(), [identity.to_age()])
    got: dict[str, str] = {}
    modes: dict[str, int] = {}
    with tarfile.open(fileobj=io.BytesIO(plain), mode="r:") as tar:
        members = tar.getmembers()
        assert members[0].name == INDEX_MEMBER
        for m in members:
            assert m.isreg() or m.isdir(), m.name
            modes[m.name] = m.mode
            if m.isreg():
                fh = tar.extractfile(m)
                assert fh is not None
                got[m.name] = hashlib.sha256(fh.read()).hexdigest()
    index = got.pop(INDEX_MEMBER)
    assert index == created.meta.index_sha256
    assert got.pop(DIGESTS_MEMBER) == created.meta.file_digests_sha256
    assert got == _prefixed(src)
    assert members[-1].name == DIGESTS_MEMBER
    assert modes["run/train.log"] == 0o600 and modes["run/ckpt"] == 0o750
    assert len(plain) % 512 == 0 and plain[-1024:] == bytes(1024)


@needs_age
def test_restore_an_archive_the_age_cli_encrypted(keys, tmp_path):
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    plain = _age("-d", "-i", str(keys.identity_path), str(created.archive))
    created.archive.write_bytes(_age("-r", keys.recipient.text, stdin=plain))
    resign(created, keys.signing)
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


@needs_age
def test_restore_a_gnu_tar_pax_archive_the_age_cli_encrypted(keys, tmp_path):
    """No ftmanifest code writes this tar: GNU tar --format=pax, then age."""
    src = _source(tmp_path)
    entries, sources = build([src])  # an index of the older form, which holds each sha256
    digests = {s.entry.path: sha256_of(s.path) for s in sources}
    entries = [replace(e, sha256=digests.get(e.path, "")) for e in entries]
    index_bytes, head = signed_index(entries, keys.signing)  # index.sign_index
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / INDEX_MEMBER).write_bytes(index_bytes)
    plain = tmp_path / "gnu.tar"
    subprocess.run(
        ["tar", "--format=pax", "-cf", str(plain), "-C", str(stage), INDEX_MEMBER,
         "-C", str(tmp_path), "run"],
        check=True, timeout=60,
    )  # fmt: skip
    assert b"PaxHeaders" in plain.read_bytes()  # GNU tar's own extended headers
    encrypted = _age("-r", keys.recipient.text, str(plain))
    meta_path = write_backup(
        tmp_path / "backups", b"", index_bytes, head, entries, keys, encrypted=encrypted
    )
    restore_meta(keys, meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


@pytest.fixture
def ssh_key(tmp_path: Path) -> Path:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    path = tmp_path / "sshkeys" / "id"
    path.parent.mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bob", "-f", str(path)],
        check=True,
        timeout=60,
    )
    return path


def _cli_backup(keys, src: Path, out: Path, *recipient_args: str) -> Path:
    argv = ["backup", "create", str(src), "--to", str(out), "--key", str(keys.signing_path)]
    assert main(argv + list(recipient_args)) == 0
    (meta_path,) = out.glob("*.meta.json")
    return meta_path


def _cli_restore(keys, meta_path: Path, dest: Path, *identity_args: str) -> int:
    argv = ["restore", str(meta_path), "--to", str(dest), "--trust", str(keys.trust_path)]
    return main(argv + list(identity_args))


@needs_age
@pytest.mark.parametrize("how", ["-r", "-R"])
def test_ssh_ed25519_recipient(keys, tmp_path, ssh_key, how, capsys):
    src = _source(tmp_path)
    pub = ssh_key.with_name("id.pub").read_text(encoding="utf-8").strip()
    if how == "-r":
        args = ["-r", pub]
    else:
        team = tmp_path / "allowed_signers"
        team.write_text(
            f'# team\nbob@example.org namespaces="ftmanifest" {pub}\n'
            f'me namespaces="ftmanifest" {public_key_line(keys.signing.public_key())}\n',
            encoding="utf-8",
        )
        args = ["-R", str(team)]
    meta_path = _cli_backup(keys, src, tmp_path / "backups", *args)
    archive = meta_path.with_name(meta_path.name.replace(".meta.json", ".age"))
    assert _cli_restore(keys, meta_path, tmp_path / "dest", "-i", str(ssh_key)) == 0
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)
    plain = _age("-d", "-i", str(ssh_key), str(archive))
    assert _tar_names(plain)[0] == INDEX_MEMBER
    assert _cli_restore(keys, meta_path, tmp_path / "d2", "-i", str(keys.identity_path)) == 1
    assert "none of the given identities" in capsys.readouterr().err


def _encrypted_ssh_key(tmp_path: Path) -> Path:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    path = tmp_path / "enc" / "id"
    path.parent.mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f", str(path)],
        check=True,
        timeout=60,
    )
    return path


def test_passphrase_protected_ssh_identity_unlocks_with_passphrase_env(keys, tmp_path, monkeypatch):
    key = _encrypted_ssh_key(tmp_path)
    src = _source(tmp_path)
    pub = key.with_name("id.pub").read_text(encoding="utf-8").strip()
    meta_path = _cli_backup(keys, src, tmp_path / "backups", "-r", pub)
    args = ["-i", str(key), "--passphrase-env", "SSH_PW"]
    monkeypatch.setenv("SSH_PW", "not the secret")
    assert _cli_restore(keys, meta_path, tmp_path / "dest", *args) != 0
    assert not (tmp_path / "dest").exists()
    monkeypatch.setenv("SSH_PW", "secret")
    assert _cli_restore(keys, meta_path, tmp_path / "dest", *args) == 0
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


def test_passphrase_protected_ssh_identity_unlocks_at_the_terminal(keys, tmp_path, monkeypatch):
    """The passphrase typed at the prompt unlocks it; a wrong one is refused."""
    import getpass
    import sys

    from ftmanifest.backup.keys import load_identities
    from ftmanifest.signing.errors import BadPassphraseError

    key = _encrypted_ssh_key(tmp_path)
    src = _source(tmp_path)
    pub = key.with_name("id.pub").read_text(encoding="utf-8").strip()
    meta_path = _cli_backup(keys, src, tmp_path / "backups", "-r", pub)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    typed = iter(["wrong", "secret"])
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": next(typed))
    with pytest.raises(BadPassphraseError):
        load_identities(key)
    identities = load_identities(key)
    restore_meta(keys, meta_path, tmp_path / "dest", identities)
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


@needs_age
def test_passphrase_backup_key_file_opens_with_pyrage_and_age_cli(keys, tmp_path, monkeypatch):
    import pyrage

    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups", passphrase="pw for the key file")
    assert created.key_path is not None
    text = pyrage.passphrase.decrypt(created.key_path.read_bytes(), "pw for the key file")
    identity_file = tmp_path / "unlocked.txt"
    fd = os.open(identity_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(text)
    assert b"AGE-SECRET-KEY-1" in text and created.meta.backup_id.encode() in text
    plain = _age("-d", "-i", str(identity_file), str(created.archive))
    names = _tar_names(plain)
    assert names[0] == INDEX_MEMBER and set(_prefixed(src)) <= set(names)
    out = tmp_path / "extracted"
    out.mkdir()
    with tarfile.open(fileobj=io.BytesIO(plain), mode="r:") as tar:
        tar.extractall(out, filter="data")
    assert _files(out / "run") == _files(src)
