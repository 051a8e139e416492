"""Every way a backup can be wrong is refused with its own reason, and nothing is written.

Each refusal asserts its error class and ``reason``, that DEST does not exist
afterwards and that no staging folder (``.DEST.restore-*``) is left beside
it.  Attackers: one who changes bytes of the archive; one who also holds the
signing key (re-signs the metadata) but not the age key; one who builds a
hostile tar, signs its index with the trusted key and encrypts it to the
backup's recipient.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import tarfile
from pathlib import Path

import pytest

from ftmanifest.backup import create as create_module
from ftmanifest.backup import index as index_module
from ftmanifest.backup.check import check_folder
from ftmanifest.backup.errors import (
    ArchiveDigestError,
    DecryptFailedError,
    DestinationExistsError,
    IndexMismatchError,
    MemberRefusedError,
    MetadataMismatchError,
    SourceChangedError,
    UnsupportedSourceError,
    WrongIdentityError,
    WrongPassphraseError,
)
from ftmanifest.backup.keys import load_identities
from ftmanifest.backup.meta import read_meta
from ftmanifest.cli import main
from ftmanifest.signing.errors import InsecureKeyPermissionsError, UnknownKeyError
from tests.backup.conftest import (
    INDEX_MEMBER,
    Member,
    backup,
    entry_for,
    hostile_backup,
    no_staging,
    resign,
    restore_meta,
    tree_of,
)

CHUNK = 65536 + 16  # an age payload chunk with its Poly1305 tag


def _source(root: Path, size: int = 3000) -> Path:
    src = root / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha\n" * 10)
    (src / "sub" / "b.bin").write_bytes(os.urandom(size))
    return src


def _made(keys, tmp_path: Path, size: int = 3000, name: str = "backups"):
    """A backup of a fresh small source (under ``tmp_path/in-N``) into ``tmp_path/name``."""
    n = sum(1 for p in tmp_path.iterdir() if p.name.startswith("in-"))
    return backup(keys, [_source(tmp_path / f"in-{n}", size)], tmp_path / name)


def _refused(keys, meta_path: Path, dest: Path, cls: type, reason: str, identities=None):
    with pytest.raises(cls) as caught:
        restore_meta(keys, meta_path, dest, identities)
    assert caught.value.reason == reason, caught.value
    assert caught.value.exit_code == 1
    no_staging(dest)
    return caught.value


def _payload_start(data: bytes) -> int:
    """Where the first payload chunk starts: after the ``--- MAC`` line and the 16-byte nonce."""
    mac_line = data.index(b"\n---") + 1
    return data.index(b"\n", mac_line) + 1 + 16


def _flip(data: bytes, where: str) -> bytes:
    """One byte changed at a named place of an age file."""
    out = bytearray(data)
    start = _payload_start(data)
    lines = data.split(b"\n")
    b64 = {
        # a base64 character replaced by another valid one, so the header still parses
        "header-stanza": len(lines[0]) + 1 + len(lines[1]) + 1 + 5,
        "header-mac": data.index(b"\n---") + 6,
    }
    if where in b64:
        at = b64[where]
        out[at] = ord("B") if out[at] != ord("B") else ord("C")
        return bytes(out)
    at = {
        "header-magic": 3,
        "nonce": start - 5,
        "first-chunk": start + 100,
        "middle": start + CHUNK + 100,
        "last-byte": len(data) - 1,
    }[where]
    out[at] ^= 0x01
    return bytes(out)


PLACES = ["header-magic", "header-stanza", "header-mac", "nonce", "first-chunk", "middle",
          "last-byte"]  # fmt: skip


# -- the encrypted file ---------------------------------------------------------


@pytest.mark.parametrize("where", PLACES)
def test_flipped_byte_is_an_archive_digest_mismatch(keys, tmp_path, where):
    created = _made(keys, tmp_path, size=200_000)
    created.archive.write_bytes(_flip(created.archive.read_bytes(), where))
    _refused(keys, created.meta_path, tmp_path / "dest", ArchiveDigestError,
             "archive-digest-mismatch")  # fmt: skip


@pytest.mark.parametrize("where", PLACES)
def test_flipped_byte_with_resigned_metadata_does_not_decrypt(keys, tmp_path, where):
    """The attacker has the signing key, not the age key: age itself refuses."""
    created = _made(keys, tmp_path, size=200_000)
    created.archive.write_bytes(_flip(created.archive.read_bytes(), where))
    resign(created, keys.signing)
    if where == "header-stanza":
        _refused(keys, created.meta_path, tmp_path / "dest", WrongIdentityError, "wrong-identity")
    else:
        _refused(keys, created.meta_path, tmp_path / "dest", DecryptFailedError, "decrypt-failed")


@pytest.mark.parametrize("cut", ["last-byte", "last-chunk", "after-header", "half"])
def test_truncated_archive_with_resigned_metadata_does_not_decrypt(keys, tmp_path, cut):
    created = _made(keys, tmp_path, size=200_000)
    data = created.archive.read_bytes()
    start = _payload_start(data)
    keep = {
        "last-byte": len(data) - 1,
        "last-chunk": start + 3 * CHUNK,  # on a chunk boundary: the last chunk is gone
        "after-header": start,
        "half": len(data) // 2,
    }[cut]
    assert keep < len(data) and (cut != "last-chunk" or len(data) > keep + 16)
    created.archive.write_bytes(data[:keep])
    resign(created, keys.signing)
    _refused(keys, created.meta_path, tmp_path / "dest", DecryptFailedError, "decrypt-failed")


@pytest.mark.parametrize("how", ["duplicated", "swapped", "dropped"])
def test_reordered_payload_chunks_do_not_decrypt(keys, tmp_path, how):
    created = _made(keys, tmp_path, size=200_000)
    data = created.archive.read_bytes()
    s = _payload_start(data)
    assert len(data) > s + 3 * CHUNK
    one, two = data[s : s + CHUNK], data[s + CHUNK : s + 2 * CHUNK]
    changed = {
        "duplicated": data[: s + CHUNK] + one + data[s + CHUNK :],
        "swapped": data[:s] + two + one + data[s + 2 * CHUNK :],
        "dropped": data[:s] + two + data[s + 2 * CHUNK :],
    }[how]
    created.archive.write_bytes(changed)
    resign(created, keys.signing)
    _refused(keys, created.meta_path, tmp_path / "dest", DecryptFailedError, "decrypt-failed")


# -- keys and passphrases -------------------------------------------------------------


def test_wrong_identity(keys, tmp_path):
    created = _made(keys, tmp_path)
    other = load_identities(keys.other_identity_path)
    _refused(keys, created.meta_path, tmp_path / "dest", WrongIdentityError, "wrong-identity",
             identities=other)  # fmt: skip


def test_wrong_passphrase(keys, tmp_path, monkeypatch, capsys):
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups", passphrase="the right one")
    assert created.key_path is not None
    with pytest.raises(WrongPassphraseError) as caught:
        load_identities(created.key_path, lambda: "a wrong one")
    assert caught.value.reason == "wrong-passphrase"
    monkeypatch.setenv("BACKUP_PW", "a wrong one")
    dest = tmp_path / "dest"
    argv = ["restore", str(created.meta_path), "--to", str(dest), "--passphrase-env", "BACKUP_PW",
            "--trust", str(keys.trust_path), "--format", "json"]  # fmt: skip
    assert main(argv) == 1
    assert json.loads(capsys.readouterr().out)["error"]["reason"] == "wrong-passphrase"
    no_staging(dest)


def test_identity_file_others_can_read_is_refused(keys, tmp_path):
    loose = tmp_path / "key.txt"
    shutil.copyfile(keys.identity_path, loose)
    os.chmod(loose, 0o644)
    with pytest.raises(InsecureKeyPermissionsError):
        load_identities(loose)
    created = _made(keys, tmp_path)
    dest = tmp_path / "dest"
    argv = ["restore", str(created.archive), "--to", str(dest), "-i", str(loose),
            "--trust", str(keys.trust_path)]  # fmt: skip
    assert main(argv) == 1
    no_staging(dest)


# -- metadata ----------------------------------------------------------------------


def test_metadata_of_another_backup_under_this_name(keys, tmp_path):
    b1 = _made(keys, tmp_path, name="one")
    b2 = _made(keys, tmp_path, name="two")
    shutil.copyfile(b2.meta_path, b1.meta_path)
    with pytest.raises(MetadataMismatchError) as caught:
        read_meta(b1.meta_path, trust_path=keys.trust_path)
    assert caught.value.reason == "metadata-mismatch" and "renamed" in caught.value.message


def test_archive_of_another_backup_under_this_name(keys, tmp_path):
    b1 = _made(keys, tmp_path, name="one")
    b2 = _made(keys, tmp_path, name="one")  # same folder
    os.replace(b2.archive, b1.archive)
    _refused(keys, b1.meta_path, tmp_path / "dest", ArchiveDigestError, "archive-digest-mismatch")


def test_metadata_file_missing(keys, tmp_path, capsys):
    created = _made(keys, tmp_path)
    created.meta_path.unlink()
    with pytest.raises(MetadataMismatchError, match="missing"):
        read_meta(created.meta_path, trust_path=keys.trust_path)
    dest = tmp_path / "dest"
    argv = ["restore", str(created.archive), "--to", str(dest), "-i", str(keys.identity_path),
            "--trust", str(keys.trust_path), "--format", "json"]  # fmt: skip
    assert main(argv) == 1
    assert json.loads(capsys.readouterr().out)["error"]["reason"] == "metadata-mismatch"
    no_staging(dest)


def test_metadata_signed_by_an_untrusted_key(keys, tmp_path):
    created = _made(keys, tmp_path)
    resign(created, keys.other_signing)
    with pytest.raises(UnknownKeyError):
        read_meta(created.meta_path, trust_path=keys.trust_path)


def test_index_of_another_backup_inside(keys, tmp_path):
    """B2's whole (valid, trusted) archive under B1's re-signed metadata."""
    b1 = _made(keys, tmp_path, name="one")
    b2 = _made(keys, tmp_path, name="two")
    shutil.copyfile(b2.archive, b1.archive)
    resign(b1, keys.signing)
    _refused(keys, b1.meta_path, tmp_path / "dest", IndexMismatchError, "index-mismatch")
    # ... and with the metadata also naming B2's index: the index is about another backup
    resign(b1, keys.signing, index_sha256=b2.meta.index_sha256)
    _refused(keys, b1.meta_path, tmp_path / "d2", MetadataMismatchError, "metadata-mismatch")


# -- hostile members (the index is signed by the trusted key) --------------------------


OK = Member("ok.txt", b"ok\n")


def _evil_cases(tmp_path: Path) -> dict[str, tuple[list[Member], type, str]]:
    absolute = str(tmp_path / "abs-target")
    return {
        "dotdot": ([Member("../evil", b"pwned"), OK], MemberRefusedError, "member-refused"),
        "dotdot-deep": ([Member("sub/../../evil", b"pwned"), OK], MemberRefusedError,
                        "member-refused"),
        "absolute": ([Member(absolute, b"pwned"), OK], MemberRefusedError, "member-refused"),
        "pax-long-path": ([Member("x" * 150 + "/../../evil", b"pwned"), OK], MemberRefusedError,
                          "member-refused"),
        "symlink": ([Member("link", type=tarfile.SYMTYPE, linkname=str(tmp_path / "evil")), OK],
                    MemberRefusedError, "member-refused"),
        "symlink-as-indexed-name": (
            [Member("ok.txt", type=tarfile.SYMTYPE, linkname=str(tmp_path / "evil"))],
            MemberRefusedError, "member-refused"),
        "hardlink": ([OK, Member("hard", type=tarfile.LNKTYPE, linkname="ok.txt")],
                     MemberRefusedError, "member-refused"),
        "char-device": ([Member("null", type=tarfile.CHRTYPE), OK], MemberRefusedError,
                        "member-refused"),
        "fifo": ([Member("fifo", type=tarfile.FIFOTYPE), OK], MemberRefusedError,
                 "member-refused"),
        "duplicate": ([OK, OK], MemberRefusedError, "member-refused"),
        "extra-member": ([OK, Member("extra.txt", b"x")], IndexMismatchError, "index-mismatch"),
        "other-size": ([Member("ok.txt", b"ok\n!")], IndexMismatchError, "index-mismatch"),
        "other-content": ([Member("ok.txt", b"OK\n")], IndexMismatchError, "index-mismatch"),
        "missing-member": ([], IndexMismatchError, "index-mismatch"),
        "folder-for-file": ([Member("ok.txt", type=tarfile.DIRTYPE)], IndexMismatchError,
                            "index-mismatch"),
    }  # fmt: skip


EVIL = list(_evil_cases(Path("/x")))


@pytest.mark.parametrize("case", EVIL)
def test_hostile_member_is_refused_and_nothing_is_written(keys, tmp_path, case):
    members, cls, reason = _evil_cases(tmp_path)[case]
    work = tmp_path / "work"
    work.mkdir()
    meta_path = hostile_backup(tmp_path / "backups", keys, members)
    dest = work / "dest"
    _refused(keys, meta_path, dest, cls, reason)
    for target in (work / "evil", tmp_path / "evil", tmp_path / "abs-target", work / "link"):
        assert not os.path.lexists(target), target
    assert sorted(os.listdir(work)) == []


@pytest.mark.parametrize(
    "trailer",
    [
        pytest.param(b"MALICIOUS" * 100, id="900-bytes"),
        pytest.param(os.urandom(40_000), id="40-KiB"),
        pytest.param(os.urandom(2 << 20), id="2-MiB"),
    ],
)
def test_bytes_after_the_end_of_the_archive(keys, tmp_path, trailer):
    meta_path = hostile_backup(tmp_path / "backups", keys, [OK], trailer=trailer)
    _refused(keys, meta_path, tmp_path / "dest", MemberRefusedError, "member-refused")


def test_zero_padding_after_the_end_is_fine(keys, tmp_path):
    """The control for the tests above: the same hand-made archive restores."""
    meta_path = hostile_backup(tmp_path / "backups", keys, [OK], trailer=bytes(20_480))
    restore_meta(keys, meta_path, tmp_path / "dest")
    assert (tmp_path / "dest" / "ok.txt").read_bytes() == b"ok\n"


def _gnu_sparse_tar(index_bytes: bytes, body: bytes) -> bytes:
    """The index, then a PAX GNU sparse 1.0 member claiming to be ``ok.txt``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        first = tarfile.TarInfo(INDEX_MEMBER)
        first.size = len(index_bytes)
        tar.addfile(first, io.BytesIO(index_bytes))
        info = tarfile.TarInfo("GNUSparseFile.0/ok.txt")
        info.size = len(body)
        info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                            "GNU.sparse.name": "ok.txt", "GNU.sparse.realsize": "3"}  # fmt: skip
        tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"1\n0\n3\n".ljust(512, b"\0") + b"ok\n", id="well-formed"),
        pytest.param(b"1\n0", id="malformed-map"),
    ],
)
def test_gnu_sparse_member_is_refused(keys, tmp_path, body):
    from tests.backup.conftest import signed_index, write_backup

    listed = [entry_for("ok.txt", b"ok\n")]
    index_bytes, head = signed_index(listed, keys.signing)
    tar = _gnu_sparse_tar(index_bytes, body)
    meta_path = write_backup(tmp_path / "backups", tar, index_bytes, head, listed, keys)
    _refused(keys, meta_path, tmp_path / "dest", MemberRefusedError, "member-refused")


def test_setuid_bits_in_the_index_are_refused(keys, tmp_path):
    """A mode beyond 0777 in the signed index does not match the entries' digest
    (modes are read as permission bits only): refused, no setuid file written."""
    import dataclasses

    listed = [dataclasses.replace(entry_for("tool", b"#!/bin/sh\n"), mode=0o6755)]
    assert listed[0].to_dict()["mode"] == "6755"
    meta_path = hostile_backup(
        tmp_path / "backups", keys, [Member("tool", b"#!/bin/sh\n", mode=0o6755)], entries=listed
    )
    _refused(keys, meta_path, tmp_path / "dest", IndexMismatchError, "index-mismatch")


def test_first_member_is_not_the_index(keys, tmp_path):
    from tests.backup.conftest import signed_index, tar_bytes, write_backup

    listed = [entry_for("ok.txt", b"ok\n")]
    index_bytes, head = signed_index(listed, keys.signing)
    tar = tar_bytes([OK, Member(INDEX_MEMBER, index_bytes)])
    meta_path = write_backup(tmp_path / "backups", tar, index_bytes, head, listed, keys)
    _refused(keys, meta_path, tmp_path / "dest", IndexMismatchError, "index-mismatch")


def test_index_signed_by_an_untrusted_key(keys, tmp_path):
    meta_path = hostile_backup(tmp_path / "backups", keys, [OK], index_signer=keys.other_signing)
    _refused(keys, meta_path, tmp_path / "dest", UnknownKeyError, "unknown-key")


# -- the destination ------------------------------------------------------------------


def test_existing_destination_needs_force(keys, tmp_path, capsys):
    created = _made(keys, tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"keep me")
    before = tree_of(dest)
    with pytest.raises(DestinationExistsError) as caught:
        restore_meta(keys, created.meta_path, dest)
    assert caught.value.reason == "destination-exists"
    assert tree_of(dest) == before
    argv = ["restore", str(created.archive), "--to", str(dest), "-i", str(keys.identity_path),
            "--trust", str(keys.trust_path)]  # fmt: skip
    assert main(argv) == 1 and tree_of(dest) == before
    capsys.readouterr()
    assert main([*argv, "--force", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["replaced"] is True
    assert tree_of(dest / "src") == tree_of(tmp_path / "in-0" / "src")
    assert not (dest / "mine.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_forced_restore_over_a_symlink_replaces_the_link_not_its_target(keys, tmp_path):
    created = _made(keys, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_bytes(b"keep me")
    dest = tmp_path / "dest"
    os.symlink(elsewhere, dest)
    with pytest.raises(DestinationExistsError):
        restore_meta(keys, created.meta_path, dest)
    restore_meta(keys, created.meta_path, dest, force=True)
    assert not dest.is_symlink() and (dest / "src" / "a.txt").is_file()
    assert sorted(os.listdir(elsewhere)) == ["precious.txt"]


def test_failed_forced_restore_keeps_the_old_destination(keys, tmp_path):
    created = _made(keys, tmp_path)
    created.archive.write_bytes(_flip(created.archive.read_bytes(), "last-byte"))
    resign(created, keys.signing)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"keep me")
    with pytest.raises(DecryptFailedError):
        restore_meta(keys, created.meta_path, dest, force=True)
    assert tree_of(dest) == {"mine.txt": ("file", 0o644 & ~_umask(), tree_of(dest)["mine.txt"][2])}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- sources that cannot be backed up ------------------------------------------------


def _special(src: Path, kind: str) -> None:
    if kind == "symlink":
        os.symlink("a.txt", src / "link")
    elif kind == "fifo":
        os.mkfifo(src / "fifo")
    else:
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(str(src / "s"))
        finally:
            sock.close()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "socket"])
def test_special_file_in_source_is_unsupported(keys, tmp_path, kind):
    src = _source(tmp_path)
    _special(src / "sub", kind)
    out = tmp_path / "backups"
    with pytest.raises(UnsupportedSourceError) as caught:
        backup(keys, [src], out)
    assert caught.value.reason == "unsupported-source"
    assert not out.exists() or list(out.iterdir()) == []


def test_symlink_given_as_the_path_is_unsupported(keys, tmp_path):
    src = _source(tmp_path)
    os.symlink(src, tmp_path / "alias")
    with pytest.raises(UnsupportedSourceError):
        backup(keys, [tmp_path / "alias"], tmp_path / "backups")


def _after_hashing(monkeypatch, change) -> None:
    """Run ``change`` after the index is built and before the files are streamed."""
    real = index_module.build

    def build(*args, **kw):
        out = real(*args, **kw)
        change()
        return out

    monkeypatch.setattr(index_module, "build", build)
    monkeypatch.setattr(create_module, "build", build)  # the name create imported


def _before_copy(monkeypatch, name: str, change) -> None:
    """Run ``change`` just before ``_copy_file`` streams the file called ``name``."""
    real = create_module._copy_file

    def copy(src, out, progress):
        if os.path.basename(src.path) == name:
            change(Path(src.path))
        return real(src, out, progress)

    monkeypatch.setattr(create_module, "_copy_file", copy)


def _grow(path: Path) -> None:
    with open(path, "ab") as fh:
        fh.write(b"appended")


def _shrink(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _same_size_same_mtime(path: Path) -> None:
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _symlink_to_a_secret(path: Path) -> None:
    """Swapped for a link to another file of the same size (what a reader that
    follows links would archive under the signed name)."""
    secret = path.parent / "secret.key"
    secret.write_bytes(b"S" * path.stat().st_size)
    link = path.parent / "link.tmp"
    os.symlink(secret, link)
    os.replace(link, path)


def _fifo(path: Path) -> None:
    """Swapped for a FIFO nobody writes to (a reader that blocks on it hangs)."""
    os.unlink(path)
    os.mkfifo(path)


@pytest.mark.parametrize(
    "change",
    [_grow, _shrink, _same_size_same_mtime, _symlink_to_a_secret, _fifo],
    ids=["grows", "shrinks", "rewritten", "symlink", "fifo"],
)
@pytest.mark.parametrize("when", ["after-index", "before-copy"])
def test_file_changing_during_backup_is_refused(keys, tmp_path, monkeypatch, change, when):
    src = _source(tmp_path, size=300_000)
    target = src / "sub" / "b.bin"
    if when == "after-index":
        _after_hashing(monkeypatch, lambda: change(target))
    else:
        _before_copy(monkeypatch, "b.bin", change)
    out = tmp_path / "backups"
    with pytest.raises(SourceChangedError) as caught:
        backup(keys, [src], out)
    assert caught.value.reason == "source-changed" and caught.value.path == str(target)
    assert list(out.iterdir()) == []  # no .tmp, no archive, no metadata


def test_file_changing_while_it_is_read_is_refused(keys, tmp_path, monkeypatch):
    """Appended to after its first chunk was streamed (a writer racing the reader)."""
    monkeypatch.setattr(create_module, "CHUNK", 4096)
    src = _source(tmp_path, size=300_000)
    target = src / "sub" / "b.bin"
    real = create_module._copy_file

    class Racing:
        def __init__(self, out):
            self.out, self.done = out, False

        def write(self, data):
            self.out.write(data)
            if not self.done and len(data) == 4096:
                self.done = True
                _grow(target)

    def copy(source, out, progress):
        return real(source, Racing(out) if Path(source.path) == target else out, progress)

    monkeypatch.setattr(create_module, "_copy_file", copy)
    out = tmp_path / "backups"
    with pytest.raises(SourceChangedError):
        backup(keys, [src], out)
    assert list(out.iterdir()) == []


# -- backup check -------------------------------------------------------------------


def _check(keys, folder: Path, capsys, *extra: str) -> tuple[int, dict]:
    argv = ["backup", "check", str(folder), "--trust", str(keys.trust_path), "--format", "json"]
    code = main(argv + list(extra))
    return code, json.loads(capsys.readouterr().out)


def _rules(report: dict) -> list[str]:
    return sorted(f["rule"] for b in report["backups"] for f in b["findings"])


def test_check_without_key_catches_a_flipped_byte(keys, tmp_path, capsys):
    created = _made(keys, tmp_path)
    _made(keys, tmp_path)  # a second, sound backup in the same folder
    created.archive.write_bytes(_flip(created.archive.read_bytes(), "first-chunk"))
    code, report = _check(keys, tmp_path / "backups", capsys)
    assert code == 1 and report["ok"] is False
    assert _rules(report) == ["backup.archive-digest-mismatch"]
    assert sorted(b["ok"] for b in report["backups"]) == [False, True]


def test_check_without_key_catches_a_missing_key_file(keys, tmp_path, capsys):
    created = backup(keys, [_source(tmp_path)], tmp_path / "backups", passphrase="pw")
    assert created.key_path is not None
    created.key_path.unlink()
    code, report = _check(keys, tmp_path / "backups", capsys)
    assert code == 1 and _rules(report) == ["backup.key-file-mismatch"]


def test_check_reports_an_archive_without_metadata_as_an_error(keys, tmp_path, capsys):
    """Its metadata deleted, or a backup interrupted before its last write: it
    can be neither verified nor restored, so it is not an OK."""
    created = _made(keys, tmp_path)
    shutil.copyfile(created.archive, tmp_path / "backups" / "run-20200101T000000Z-0123456789ab.age")
    code, report = _check(keys, tmp_path / "backups", capsys)
    assert code == 1 and report["ok"] is False
    assert [b["ok"] for b in report["backups"]] == [True]
    (orphan,) = report["findings"]
    assert orphan["rule"] == "backup.metadata-mismatch" and orphan["severity"] == "error"
    assert orphan["path"].endswith("0123456789ab.age")


def test_check_reports_a_temp_file_of_a_crash_as_a_warning(keys, tmp_path, capsys):
    _made(keys, tmp_path)
    (tmp_path / "backups" / ".run-20200101T000000Z-0123456789ab.age.tmp").write_bytes(b"x")
    code, report = _check(keys, tmp_path / "backups", capsys)
    assert code == 0 and report["ok"] is True
    (orphan,) = report["findings"]
    assert orphan["rule"] == "backup.orphan" and orphan["severity"] == "warning"
    assert check_folder(tmp_path / "backups", trust_path=keys.trust_path)[1][0].severity == (
        "warning"
    )


def test_check_read_data_catches_a_resigned_flipped_archive(keys, tmp_path, capsys):
    created = _made(keys, tmp_path, size=200_000)
    created.archive.write_bytes(_flip(created.archive.read_bytes(), "middle"))
    resign(created, keys.signing)
    code, report = _check(keys, tmp_path / "backups", capsys)
    assert code == 0, "without the key the re-signed archive looks sound"
    code, report = _check(keys, tmp_path / "backups", capsys, "--read-data", "-i",
                          str(keys.identity_path))  # fmt: skip
    assert code == 1 and _rules(report) == ["backup.decrypt-failed"]
    assert report["backups"][0]["data_read"] is False
