"""Restore binds the archive through its signed age header, not a second sha256.

The metadata of a backup signs the archive's age header (the stanzas that wrap
the file key, and the header's MAC under that key).  Restore checks it before
age starts and then relies on age's authentication of every payload chunk
under that file key, on the signed index and on every file's sha256; the
whole archive's sha256 is computed only when something is refused, to name
the cause.  These tests attack what that leaves: an archive re-encrypted by
someone who knows only the recipient (same size, same plaintext: only the
header tells it apart), a writer who swaps the archive's bytes after the
header was read, signed metadata naming another header, and hostile header
fields in the metadata.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from ftmanifest.backup import unpack
from ftmanifest.backup.agechild import HEADER_MAX, header_size
from ftmanifest.backup.errors import ArchiveDigestError
from ftmanifest.backup.meta import parse_predicate, read_meta, sign_meta
from ftmanifest.errors import FtManifestError
from tests.backup.conftest import (
    AGE,
    Keys,
    backup,
    needs_age,
    no_staging,
    refused_everywhere,
    restore_meta,
    tree_of,
)


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha\n" * 1000)
    (src / "sub" / "b.bin").write_bytes(os.urandom(200_000))
    return src


def _encrypt(keys: Keys, tar: bytes) -> bytes:
    """``tar`` sealed anew to the backup's recipient by the ``age`` command,
    which made the backup (so the forgery has its size; pyrage adds a
    stanza of random length)."""
    import subprocess

    assert AGE is not None
    return subprocess.run([AGE, "-r", keys.recipient.text], input=tar, capture_output=True,
                          check=True).stdout  # fmt: skip


def test_create_signs_the_archives_age_header(keys, tmp_path):
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    data = created.archive.read_bytes()
    size = header_size(data)
    assert size is not None and data[size - 49 : size - 44] == b"\n--- "
    assert created.meta.archive_header_size == size
    assert created.meta.archive_header_sha256 == hashlib.sha256(data[:size]).hexdigest()
    meta, _ = read_meta(created.meta_path, trust_path=keys.trust_path)  # signed and read back
    assert (meta.archive_header_size, meta.archive_header_sha256) == (
        created.meta.archive_header_size,
        created.meta.archive_header_sha256,
    )
    assert meta.predicate()["archive"]["header"] == {
        "size": size,
        "sha256": created.meta.archive_header_sha256,
    }


@needs_age
def test_an_archive_re_encrypted_to_the_same_recipient_is_refused(keys, tmp_path):
    """Someone who knows only the public recipient decrypts nothing, but with
    the plaintext in hand (or any tar) can seal a new archive of the same size
    to the same recipient; the signed header is what tells it apart."""
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    tar = _plaintext_of(keys, created.archive.read_bytes())
    forged = _encrypt(keys, tar)
    assert len(forged) == created.meta.archive_size  # the size check alone passes it
    assert _plaintext_of(keys, forged) == tar  # and it holds exactly the signed files
    created.archive.write_bytes(forged)
    err = refused_everywhere(keys, tmp_path, created.meta_path, ArchiveDigestError, "not the one")
    assert err.field == "archive.sha256"
    assert err.expected.startswith(f"sha256:{created.meta.archive_sha256}")


def _other_files(tar: bytes) -> bytes:
    """``tar`` with other bytes in a.txt, at its size: the tar still parses and
    every size the signed index lists still holds."""
    at = tar.index(b"alpha\nalpha\n")
    return tar[:at] + b"OMEGA" + tar[at + 5 :]


def _plaintext_of(keys: Keys, data: bytes) -> bytes:
    import pyrage

    return pyrage.decrypt(data, [i.to_age() for i in keys.identities()])


def test_a_genuine_archive_under_metadata_naming_another_header_is_refused(keys, tmp_path):
    """The whole archive is the signed one, but the signed header is not its
    header: the header check runs, and names its own field."""
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    meta = dataclasses.replace(created.meta, archive_header_sha256="0" * 64)
    created.meta_path.write_bytes(sign_meta(meta, keys.signing))
    err = refused_everywhere(keys, tmp_path, created.meta_path, ArchiveDigestError, "age header")
    assert err.field == "archive.header.sha256"
    assert err.expected.startswith("sha256:" + "0" * 64)
    assert created.meta.archive_header_sha256 in err.observed


def test_a_genuine_restore_does_not_hash_the_whole_archive(keys, tmp_path, monkeypatch):
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")

    def no(*_a, **_k):
        raise AssertionError("the whole archive was hashed")

    monkeypatch.setattr(unpack, "_digest", no)
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "src") == tree_of(src)


@needs_age
def test_older_metadata_without_a_header_still_hashes_the_whole_archive(keys, tmp_path):
    """Metadata made before the header was signed: a re-encrypted archive is
    refused by the whole archive's sha256 (on the thread beside age)."""
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    meta = dataclasses.replace(created.meta, archive_header_size=None, archive_header_sha256=None)
    created.meta_path.write_bytes(sign_meta(meta, keys.signing))
    assert "header" not in meta.predicate()["archive"]
    created.archive.write_bytes(_encrypt(keys, _plaintext_of(keys, created.archive.read_bytes())))
    err = refused_everywhere(keys, tmp_path, created.meta_path, ArchiveDigestError, "not the one")
    assert err.field == "archive.sha256"


def _swap_after_header(monkeypatch: pytest.MonkeyPatch, archive: Path, data: bytes) -> list[int]:
    """Rewrite ``archive`` in place (same inode) with ``data`` just after the
    header check read it: a writer who can write the backups folder racing age."""
    real = unpack._check_header
    swaps: list[int] = []

    def check_then_swap(fd, path, meta):
        real(fd, path, meta)
        with open(archive, "r+b") as fh:
            fh.write(data)
        swaps.append(1)

    monkeypatch.setattr(unpack, "_check_header", check_then_swap)
    return swaps


@needs_age
def test_archive_rewritten_after_the_header_check_with_other_files_is_refused(
    keys, tmp_path, monkeypatch
):
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    forged = _encrypt(keys, _other_files(_plaintext_of(keys, created.archive.read_bytes())))
    assert len(forged) == created.meta.archive_size
    swaps = _swap_after_header(monkeypatch, created.archive, forged)
    with pytest.raises(ArchiveDigestError) as caught:
        restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert swaps == [1]
    assert caught.value.field == "archive.sha256"  # the cause named: the archive changed
    no_staging(tmp_path / "dest")


@needs_age
def test_archive_rewritten_after_the_header_check_is_refused_by_the_files_digest(
    keys, tmp_path, monkeypatch
):
    """The same swap, with the bytes put back before the cause is looked for:
    the refusal is then the file whose sha256 differs from the signed one."""
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    genuine = created.archive.read_bytes()
    other = _other_files(_plaintext_of(keys, genuine))
    _swap_after_header(monkeypatch, created.archive, _encrypt(keys, other))
    real_digest = unpack._digest

    def restored_then_digest(fd, stop=None):
        created.archive.write_bytes(genuine)  # new inode; fd still reads the forged one
        with open(created.archive, "rb") as fh:
            return real_digest(fh.fileno(), stop)

    monkeypatch.setattr(unpack, "_digest", restored_then_digest)
    with pytest.raises(FtManifestError) as caught:
        restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert not isinstance(caught.value, ArchiveDigestError)
    assert "a.txt" in str(caught.value) or "a.txt" in (caught.value.path or "")
    no_staging(tmp_path / "dest")


@needs_age
def test_archive_rewritten_after_the_header_check_with_the_same_files_restores_them(
    keys, tmp_path, monkeypatch
):
    """What a re-encryption with identical files can do once past the header:
    restore exactly the signed files (nothing else is accepted)."""
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    forged = _encrypt(keys, _plaintext_of(keys, created.archive.read_bytes()))
    swaps = _swap_after_header(monkeypatch, created.archive, forged)
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert swaps == [1]
    assert tree_of(tmp_path / "dest" / "src") == tree_of(src)


# -- the metadata's header fields ------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        {"size": 0, "sha256": "a" * 64},
        {"size": HEADER_MAX + 1, "sha256": "a" * 64},
        {"size": 10**9, "sha256": "a" * 64},  # beyond the archive
        {"size": True, "sha256": "a" * 64},
        {"size": "100", "sha256": "a" * 64},
        {"size": 100, "sha256": "A" * 64},
        {"size": 100},
        {"sha256": "a" * 64},
        "header",
        [],
    ],
)
def test_malformed_header_fields_are_refused(keys, tmp_path, header):
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    predicate = created.meta.predicate()
    predicate["archive"]["header"] = header
    with pytest.raises(FtManifestError, match="metadata"):
        parse_predicate(predicate, "x.meta.json")


def test_header_fields_round_trip_through_the_predicate(keys, tmp_path):
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    assert parse_predicate(created.meta.predicate(), "x") == created.meta


# -- finding the header ----------------------------------------------------------------


def _age_encrypt(args: list[str], tmp_path: Path) -> bytes:
    import subprocess

    assert AGE is not None
    return subprocess.run([AGE, *args], input=b"x" * 70_000, capture_output=True,
                          check=True).stdout  # fmt: skip


def test_header_size_of_pyrage_archives(keys):
    import pyrage

    two = [keys.recipient.to_age(), pyrage.x25519.Identity.generate().to_public()]
    for data in (pyrage.encrypt(b"x" * 70_000, two), pyrage.passphrase.encrypt(b"x", "pw")):
        size = header_size(data)
        assert size is not None and data[:size].endswith(b"\n") and b"\n--- " in data[:size]
        assert data[:size].count(b"\n--- ") == 1
        assert header_size(data[: size - 1]) is None  # the MAC line cut short


@needs_age
def test_header_size_of_the_age_binarys_archives(keys, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    ssh = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    data = _age_encrypt(["-r", keys.recipient.text, "-r", ssh], tmp_path)
    size = header_size(data)
    assert size is not None and data[:size].count(b"\n-> ") == 2
    assert data[:size].count(b"\n--- ") == 1


@pytest.mark.parametrize(
    "prefix",
    [
        b"",
        b"age-encryption.org/v2\n--- " + b"A" * 43 + b"\n",
        b"-----BEGIN AGE ENCRYPTED FILE-----\n",  # armored: backups are never armored
        b"age-encryption.org/v1\n-> X25519 abc\n" + b"B" * 43 + b"\n---" + b"A" * 43 + b"\n",
        b"age-encryption.org/v1\n-> X25519 abc\n--- " + b"A" * 42 + b"\n",
        b"age-encryption.org/v1\n-> X25519 abc\n"
        + b"B" * HEADER_MAX
        + b"\n--- "
        + b"A" * 43
        + b"\n",
    ],
    ids=["empty", "other-version", "armored", "no-space", "short-mac", "past-the-limit"],
)
def test_no_header_is_found_where_there_is_none(prefix):
    assert header_size(prefix) is None


def test_a_header_too_long_to_sign_falls_back_to_the_whole_sha256(keys, tmp_path, monkeypatch):
    """More recipients than fit ``HEADER_MAX``: the metadata names no header
    and restore hashes the whole archive, as for older backups."""
    from ftmanifest.backup import create

    monkeypatch.setattr(create, "HEADER_MAX", 100)  # shorter than any real header
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    assert created.meta.archive_header_sha256 is None
    assert "header" not in created.meta.predicate()["archive"]
    dest = tmp_path / "dest"
    restore_meta(keys, created.meta_path, dest)
    assert tree_of(dest / "src") == tree_of(src)


# -- a holder of the file key ------------------------------------------------------------
#
# Whoever can decrypt a backup (any of its recipients) can unwrap its file key
# from the signed header and seal another payload under that very header: the
# header check passes and age authenticates every chunk.  What stops other
# files is the signed index and each file's signed sha256.  The age v1 steps
# below are written from the format's specification and checked against
# pyrage on the genuine archive before they are used.

_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def _identity_scalar(path: Path) -> bytes:
    """The 32 bytes of an ``AGE-SECRET-KEY-1...`` line (bech32, checksum not checked)."""
    line = next(x for x in path.read_text().split() if x.startswith("AGE-SECRET-KEY-1"))
    data = [_BECH32.index(c) for c in line.lower().rpartition("1")[2][:-6]]
    acc, bits, out = 0, 0, bytearray()
    for v in data:
        acc, bits = (acc << 5) | v, bits + 5
        if bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
    assert len(out) == 32
    return bytes(out)


def _hkdf(ikm: bytes, salt: bytes, info: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(hashes.SHA256(), 32, salt, info).derive(ikm)


def _b64(text: bytes) -> bytes:
    import base64

    return base64.b64decode(text + b"=" * (-len(text) % 4))


def _file_key(header: bytes, scalar: bytes) -> bytes:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    lines = header.split(b"\n")
    at = next(i for i, x in enumerate(lines) if x.startswith(b"-> X25519 "))
    share, body = _b64(lines[at].split()[2]), _b64(lines[at + 1])
    me = X25519PrivateKey.from_private_bytes(scalar)
    mine = me.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    shared = me.exchange(X25519PublicKey.from_public_bytes(share))
    wrap = _hkdf(shared, share + mine, b"age-encryption.org/v1/X25519")
    return ChaCha20Poly1305(wrap).decrypt(bytes(12), body, None)


def _stream(file_key: bytes, nonce: bytes, data: bytes, seal: bool) -> bytes:
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    aead = ChaCha20Poly1305(_hkdf(file_key, nonce, b"payload"))
    step = (1 << 16) + (16 if not seal else 0)
    pieces = [data[i : i + step] for i in range(0, len(data), step)] or [b""]
    out = []
    for n, piece in enumerate(pieces):
        chunk_nonce = n.to_bytes(11, "big") + (b"\x01" if n == len(pieces) - 1 else b"\x00")
        op = aead.encrypt if seal else aead.decrypt
        out.append(op(chunk_nonce, piece, None))
    return b"".join(out)


def _reseal(keys: Keys, archive: bytes, tar: bytes | None = None) -> tuple[bytes, bytes]:
    """(the genuine archive's plaintext, an archive with the same header holding
    ``tar`` — default the same plaintext — under a fresh payload nonce)."""
    size = header_size(archive)
    assert size is not None
    header, payload = archive[:size], archive[size:]
    key = _file_key(header, _identity_scalar(keys.identity_path))
    plain = _stream(key, payload[:16], payload[16:], seal=False)
    assert plain == _plaintext_of(keys, archive)  # the steps above are age's
    nonce = os.urandom(16)
    forged = header + nonce + _stream(key, nonce, plain if tar is None else tar, seal=True)
    assert _plaintext_of(keys, forged) == (plain if tar is None else tar)  # pyrage opens it
    return plain, forged


def test_a_recipient_resealing_other_files_under_the_signed_header_is_refused(keys, tmp_path):
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    genuine = created.archive.read_bytes()
    plain, _ = _reseal(keys, genuine)
    _, forged = _reseal(keys, genuine, _other_files(plain))
    size = header_size(genuine)
    assert len(forged) == len(genuine) and forged[:size] == genuine[:size]  # the signed header
    created.archive.write_bytes(forged)
    err = refused_everywhere(keys, tmp_path, created.meta_path, ArchiveDigestError, "not the one")
    assert err.field == "archive.sha256"


def test_a_recipient_resealing_the_same_files_restores_them_and_check_names_it(keys, tmp_path):
    """The one archive restore accepts that is not byte for byte the signed
    one: the same files, sealed again by a holder of the file key.  What it
    restores is exactly what was signed; ``backup check`` still refuses the
    archive (docs/limits.md, Backups)."""
    from ftmanifest.backup.check import check_folder

    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    _, forged = _reseal(keys, created.archive.read_bytes())
    created.archive.write_bytes(forged)
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "src") == tree_of(src)
    checked, _ = check_folder(created.meta_path.parent, trust_path=keys.trust_path)
    assert [c.ok for c in checked] == [False]
