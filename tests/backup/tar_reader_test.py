"""Restore's own tar reader, and the archive digest computed while age decrypts.

The reader (``backup.tarstream``, judged by ``backup.members``) parses the tar stream
itself.  Each case here is a tar Python's ``tarfile`` or GNU tar writes, or one byte
changed in one, and the test says what ``tarfile`` (the loader a user might reach for)
makes of it, so a case the reader accepts is one that really restores those bytes, and
a case it refuses is named for what it is, never restored.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from ftmanifest.backup import unpack as unpack_module
from ftmanifest.backup.errors import ArchiveDigestError, IndexMismatchError, MemberRefusedError
from ftmanifest.backup.index import INDEX_MEMBER
from tests.backup.conftest import (
    entry_for,
    no_staging,
    restore_meta,
    signed_index,
    write_backup,
)


def _tar(index_bytes: bytes, members: list[tuple[tarfile.TarInfo, bytes]], **kw) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", **kw) as tar:
        first = tarfile.TarInfo(INDEX_MEMBER)
        first.size = len(index_bytes)
        tar.addfile(first, io.BytesIO(index_bytes))
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def _file(name: str, data: bytes, **fields) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1_700_000_000
    for k, v in fields.items():
        setattr(info, k, v)
    return info, data


def _backup(keys, tmp_path: Path, names: dict[str, bytes], build) -> Path:
    """A backup whose signed index lists ``names``; ``build(index_bytes)`` makes its tar."""
    listed = [entry_for(n, d) for n, d in names.items()]
    index_bytes, head = signed_index(listed, keys.signing)
    return write_backup(tmp_path / "backups", build(index_bytes), index_bytes, head, listed, keys)


def _refused(keys, meta_path: Path, dest: Path, cls: type, words: str) -> None:
    with pytest.raises(cls) as caught:
        restore_meta(keys, meta_path, dest)
    assert words in f"{caught.value} {caught.value.observed}", caught.value
    assert caught.value.exit_code == 1
    no_staging(dest)


def _in_index_after(tar: bytes, name: bytes) -> int:
    """Where the header of the member named ``name`` starts (after the index)."""
    return tar.index(name, tar.index(INDEX_MEMBER.encode()) + 512) // 512 * 512


LONG = "d" * 90 + "/" + "e" * 80 + ".txt"  # 175 characters: the ustar prefix field


@pytest.mark.parametrize(
    "fmt", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT], ids=["ustar-prefix", "pax-path"]
)
def test_a_long_name_restores_as_tarfile_reads_it(keys, tmp_path, fmt):
    build = lambda ix: _tar(ix, [_file(LONG, b"long\n")], format=fmt)  # noqa: E731
    with tarfile.open(fileobj=io.BytesIO(build(b"{}")), mode="r") as tar:
        assert tar.getnames()[1] == LONG  # what the standard library reads
    restore_meta(keys, _backup(keys, tmp_path, {LONG: b"long\n"}, build), tmp_path / "dest")
    assert (tmp_path / "dest" / LONG).read_bytes() == b"long\n"


def test_ignored_pax_records_change_nothing(keys, tmp_path):
    """Times and owners in pax records are not taken (the index's are)."""
    info, data = _file("ok.txt", b"ok\n")
    info.pax_headers = {"mtime": "1.5", "uid": "99999999", "uname": "someone", "comment": "hi"}
    build = lambda ix: _tar(ix, [(info, data)], format=tarfile.PAX_FORMAT)  # noqa: E731
    restore_meta(keys, _backup(keys, tmp_path, {"ok.txt": b"ok\n"}, build), tmp_path / "dest")
    restored = tmp_path / "dest" / "ok.txt"
    assert restored.read_bytes() == b"ok\n" and restored.stat().st_mtime == 1_700_000_000


def _gnu_long_name(ix: bytes) -> bytes:
    return _tar(ix, [_file("x" * 120, b"ok\n")], format=tarfile.GNU_FORMAT)


def _global_header(ix: bytes) -> bytes:
    return _tar(ix, [_file("ok.txt", b"ok\n")], format=tarfile.PAX_FORMAT,
                pax_headers={"comment": "global"})  # fmt: skip


def _contiguous(ix: bytes) -> bytes:
    return _tar(ix, [_file("ok.txt", b"ok\n", type=tarfile.CONTTYPE)], format=tarfile.PAX_FORMAT)


@pytest.mark.parametrize(
    ("build", "cls", "words"),
    [
        pytest.param(_gnu_long_name, MemberRefusedError, "ustar magic", id="gnu-format"),
        pytest.param(_global_header, IndexMismatchError, "a pax global header",
                     id="pax-global-header"),
        pytest.param(_contiguous, MemberRefusedError, "a contiguous file", id="contiguous-file"),
    ],
)  # fmt: skip
def test_tar_kinds_this_reader_does_not_take_are_refused_by_name(keys, tmp_path, build, cls, words):
    name = "x" * 120 if build is _gnu_long_name else "ok.txt"
    listed = {name: b"ok\n"}
    if build is _contiguous:  # tarfile would restore it as a regular file
        with tarfile.open(fileobj=io.BytesIO(build(b"{}"))) as tar:
            assert tar.getmembers()[1].isreg()
    _refused(keys, _backup(keys, tmp_path, listed, build), tmp_path / "dest", cls, words)


def _damaged(offset_in_header: int, value: bytes):
    def build(ix: bytes) -> bytes:
        tar = bytearray(_tar(ix, [_file("ok.txt", b"ok\n")], format=tarfile.PAX_FORMAT))
        at = _in_index_after(bytes(tar), b"ok.txt") + offset_in_header
        tar[at : at + len(value)] = value
        return bytes(tar)

    return build


@pytest.mark.parametrize(
    ("build", "words"),
    [
        pytest.param(_damaged(0, b"ok.txu"), "checksum does not match", id="bad-checksum"),
        pytest.param(_damaged(257, b"ustar "), "ustar magic", id="v7-or-gnu-magic"),
        pytest.param(_damaged(512 + 3, b"!"), "nonzero padding", id="bytes-in-padding"),
    ],
)
def test_a_damaged_header_is_malformed(keys, tmp_path, build, words):
    _refused(keys, _backup(keys, tmp_path, {"ok.txt": b"ok\n"}, build), tmp_path / "dest",
             MemberRefusedError, words)  # fmt: skip


def _pax_member(records: bytes, name: bytes = b"ok.txt", body: bytes = b"ok\n") -> bytes:
    """A pax header with ``records`` then a ustar header for ``name``, by hand."""

    def header(n: bytes, kind: bytes, size: int) -> bytes:
        block = bytearray(512)
        block[0 : len(n)] = n
        block[100:108] = b"0000644\0"
        block[108:124] = b"0000000\0" * 2
        block[124:136] = b"%011o\0" % size
        block[136:148] = b"%011o\0" % 1_700_000_000
        block[156:157] = kind
        block[257:265] = b"ustar\x0000"
        block[148:156] = b" " * 8
        block[148:156] = b"%06o\0 " % sum(block)
        return bytes(block)

    pad = lambda b: b + bytes(-len(b) % 512)  # noqa: E731
    return (
        header(b"PaxHeader", b"x", len(records))
        + pad(records)
        + header(name, b"0", len(body))
        + pad(body)
    )


def _with(member: bytes):
    def build(ix: bytes) -> bytes:
        head = _tar(ix, [], format=tarfile.PAX_FORMAT)
        end = (512 + len(ix) + 511) // 512 * 512  # the index's header and bytes, padded
        return head[:end] + member + bytes(1024)

    return build


def test_a_hand_made_pax_member_restores(keys, tmp_path):
    """The control for the malformed records below: well-formed, it restores."""
    good = _with(_pax_member(b"11 path=a1\n", name=b"other"))
    with tarfile.open(fileobj=io.BytesIO(good(b"{}"))) as tar:
        assert tar.getnames() == [INDEX_MEMBER, "a1"]
    restore_meta(keys, _backup(keys, tmp_path, {"a1": b"ok\n"}, good), tmp_path / "dest")
    assert (tmp_path / "dest" / "a1").read_bytes() == b"ok\n"


@pytest.mark.parametrize(
    ("records", "words"),
    [
        pytest.param(b"12 path=a1\n", "the wrong length", id="length-too-long"),
        pytest.param(b"xx path=a1\n", "without its length", id="no-length"),
        pytest.param(b"9 patha1\n", "without '='", id="no-equals"),
        pytest.param(b"11 size=-3\n", "size that is not a number", id="negative-size"),
        pytest.param(b"28 GNU.sparse.realsize=3000\n", "a sparse file", id="gnu-sparse-record"),
    ],
)
def test_malformed_pax_records_are_refused(keys, tmp_path, records, words):
    build = _with(_pax_member(records, name=b"a1"))
    _refused(keys, _backup(keys, tmp_path, {"a1": b"ok\n"}, build), tmp_path / "dest",
             MemberRefusedError, words)  # fmt: skip


def test_a_pax_size_decides_where_the_next_header_is(keys, tmp_path):
    """pax says 3 bytes, the ustar field 0: the bytes are ``ok\\n`` as tarfile reads them."""
    member = bytearray(_pax_member(b"10 size=3\n", name=b"a1"))
    member[512 + 512 + 124 : 512 + 512 + 136] = b"%011o\0" % 0
    member[512 + 512 + 148 : 512 + 512 + 156] = b" " * 8
    member[512 + 512 + 148 : 512 + 512 + 156] = b"%06o\0 " % sum(member[1024:1536])
    build = _with(bytes(member))
    with tarfile.open(fileobj=io.BytesIO(build(b"{}"))) as tar:
        assert tar.extractfile("a1").read() == b"ok\n"
    restore_meta(keys, _backup(keys, tmp_path, {"a1": b"ok\n"}, build), tmp_path / "dest")
    assert (tmp_path / "dest" / "a1").read_bytes() == b"ok\n"


def test_a_folder_with_data_is_refused(keys, tmp_path):
    def build(ix: bytes) -> bytes:
        info = tarfile.TarInfo("sub")
        info.type = tarfile.DIRTYPE
        tar = bytearray(_tar(ix, [(info, b"")], format=tarfile.PAX_FORMAT))
        at = _in_index_after(bytes(tar), b"sub")
        tar[at + 124 : at + 136] = b"%011o\0" % 512
        tar[at + 148 : at + 156] = b" " * 8
        tar[at + 148 : at + 156] = b"%06o\0 " % sum(tar[at : at + 512])
        return bytes(tar)

    _refused(keys, _backup(keys, tmp_path, {}, build), tmp_path / "dest", MemberRefusedError,
             "a folder with 512 bytes of data")  # fmt: skip


def test_an_empty_tar_is_not_a_backup(keys, tmp_path):
    build = lambda ix: bytes(10240)  # noqa: E731
    _refused(keys, _backup(keys, tmp_path, {}, build), tmp_path / "dest", IndexMismatchError,
             "does not start with its signed index")  # fmt: skip


# -- the archive's digest, computed while age decrypts ------------------------------


def _genuine(keys, tmp_path: Path) -> tuple[Path, bytes]:
    build = lambda ix: _tar(ix, [_file("ok.txt", b"ok\n")], format=tarfile.PAX_FORMAT)  # noqa: E731
    meta_path = _backup(keys, tmp_path, {"ok.txt": b"ok\n"}, build)
    import pyrage

    archive = next(meta_path.parent.glob("*.age"))
    return archive, pyrage.decrypt(archive.read_bytes(), [keys.identities()[0].to_age()])


def test_same_content_encrypted_again_is_refused_by_its_digest(keys, tmp_path):
    """Everything inside is genuine, and age authenticates it: the digest alone decides."""
    import pyrage

    listed = [entry_for("ok.txt", b"ok\n")]
    index_bytes, head = signed_index(listed, keys.signing)
    plain = _tar(index_bytes, [_file("ok.txt", b"ok\n")], format=tarfile.PAX_FORMAT)
    by_size: dict[int, bytes] = {}
    for _ in range(200):  # rage adds a random "grease" stanza: two of one size wanted
        again = pyrage.encrypt(plain, [keys.recipient.to_age()])
        if len(again) in by_size:
            break
        by_size[len(again)] = again
    first = by_size[len(again)]
    assert len(first) == len(again) and first != again
    meta_path = write_backup(
        tmp_path / "backups", plain, index_bytes, head, listed, keys, encrypted=first
    )
    next(meta_path.parent.glob("*.age")).write_bytes(again)
    _refused(keys, meta_path, tmp_path / "dest", ArchiveDigestError, "not the one the signed")


def test_an_archive_of_another_size_is_refused_before_age_starts(keys, tmp_path, monkeypatch):
    archive, _ = _genuine(keys, tmp_path)
    archive.write_bytes(archive.read_bytes() + b"\0")
    started = []
    monkeypatch.setattr(unpack_module, "AgeChild", lambda *a, **k: started.append(a))
    meta_path = next(archive.parent.glob("*.meta.json"))
    _refused(keys, meta_path, tmp_path / "dest", ArchiveDigestError, "bytes")
    assert started == []


def test_a_foreign_archive_is_named_by_its_digest_not_by_what_failed_first(keys, tmp_path):
    """Encrypted to the public recipient by someone without the signing key: the index
    inside fails first, yet the refusal is that the archive is not the signed one."""
    import pyrage

    archive, plain = _genuine(keys, tmp_path)
    forged = bytearray(plain)
    forged[plain.index(b"ok\n", 1024)] = ord("O")  # a member's byte: index mismatch inside
    archive.write_bytes(pyrage.encrypt(bytes(forged), [keys.recipient.to_age()]))
    meta_path = next(archive.parent.glob("*.meta.json"))
    _refused(keys, meta_path, tmp_path / "dest", ArchiveDigestError, "not the one the signed")


def test_the_digest_is_of_the_descriptor_age_reads(keys, tmp_path, monkeypatch):
    """Swapping the archive's name after it was opened changes neither read."""
    archive, _ = _genuine(keys, tmp_path)
    real = unpack_module._decrypt

    def swap_then_decrypt(fd, path, *rest):
        path.rename(path.with_suffix(".moved"))
        path.write_bytes(b"attacker" * 100)
        return real(fd, path, *rest)

    monkeypatch.setattr(unpack_module, "_decrypt", swap_then_decrypt)
    meta_path = next(archive.parent.glob("*.meta.json"))
    restore_meta(keys, meta_path, tmp_path / "dest")
    assert (tmp_path / "dest" / "ok.txt").read_bytes() == b"ok\n"
    assert archive.read_bytes() == b"attacker" * 100  # the name now holds the attacker's
