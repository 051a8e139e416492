"""Compressed pickles, torch zip/tar containers and bounded memory.

Every dangerous file is loaded here with its real loader (pickle over the
matching decompressor, joblib.load, torch.load(weights_only=False)) to prove a
harmless payload - ``Path.touch`` on a marker - runs; the scanner must flag it
or call it not scanned, never clean.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import pickle
import struct
import tarfile
import tracemalloc
import zipfile
import zlib
from functools import partial
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest
import torch

from ftmanifest.findings import Finding
from ftmanifest.scan.artifacts.binary import BinaryLimits, scan_binary
from ftmanifest.scan.artifacts.sniff import detect_format
from ftmanifest.scan.text.text import scan_text
from tests.scan.npy_descr_test import Touch

OPENERS = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}
COMPRESS = {
    "gzip": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "lzma": partial(lzma.compress, format=lzma.FORMAT_ALONE),
    "zlib": zlib.compress,
}
DECOMPRESS = {
    "gzip": gzip.decompress,
    "bz2": bz2.decompress,
    "xz": lzma.decompress,
    "lzma": lzma.decompress,
    "zlib": zlib.decompress,
}


def _runs(load: Any, marker: Path) -> bool:
    try:
        load()
    except Exception:  # noqa: BLE001 - only the side effect matters
        pass
    return marker.exists()


def _scan(path: Path, **kw: Any) -> list[Finding]:
    return scan_binary(path, detect_format(path), partial(scan_text), **kw)


def _flagged(found: list[Finding]) -> bool:
    return any(f.rule == "pickle.unsafe-import" and f.severity == "error" for f in found)


@pytest.mark.parametrize("kind", sorted(COMPRESS))
@pytest.mark.parametrize("protocol", [0, 4])
def test_compressed_pickles(tmp_path: Path, kind: str, protocol: int) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "model.pkl.z"
    path.write_bytes(COMPRESS[kind](pickle.dumps({"w": Touch(marker)}, protocol=protocol)))
    assert _runs(lambda: pickle.loads(DECOMPRESS[kind](path.read_bytes())), marker)
    found = _scan(path)
    assert _flagged(found)
    assert {f.extra.get("compressed") for f in found if f.rule == "pickle.unsafe-import"} == {kind}


@pytest.mark.parametrize("compress", ["zlib", "gzip", "bz2", "lzma", "xz"])
def test_joblib_compressed(tmp_path: Path, compress: str) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "model.joblib"
    joblib.dump({"w": np.arange(4), "x": Touch(marker)}, path, compress=(compress, 3))
    assert _runs(lambda: joblib.load(path), marker)
    assert _flagged(_scan(path))


def test_joblib_zfile(tmp_path: Path) -> None:
    from joblib.numpy_pickle_compat import write_zfile

    marker = tmp_path / "ran"
    path = tmp_path / "old.pkl"
    with open(path, "wb") as fh:
        write_zfile(fh, pickle.dumps(Touch(marker), protocol=2))
    assert _runs(lambda: joblib.load(path), marker)
    assert _flagged(_scan(path))


def test_joblib_uncompressed_never_clean(tmp_path: Path) -> None:
    """Array bytes sit between pickle opcodes; what follows them must not pass as clean."""
    marker = tmp_path / "ran"
    path = tmp_path / "model.joblib"
    joblib.dump({"a": np.arange(1000), "x": Touch(marker)}, path)
    assert _runs(lambda: joblib.load(path), marker)
    found = _scan(path)
    # the walk reads past the array's bytes as joblib.load does and names the payload
    unsafe = {f.observed for f in found if f.rule == "pickle.unsafe-import"}
    assert any(name and name.endswith("touch") for name in unsafe), found
    assert all(f.severity == "error" for f in found if f.rule == "pickle.unsafe-import")


def test_gzip_text_still_scanned_and_gzip_proto0_is_a_pickle(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt.gz"
    text.write_bytes(gzip.compress(b"key = AKIAIOSFODNN7EXAMPLQ\n" * 3))
    assert not [f for f in _scan(text) if f.kind in ("not-scanned", "unsafe-pickle")]
    proto0 = tmp_path / "p0.gz"
    proto0.write_bytes(gzip.compress(b"cos\nsystem\n(Vtrue\ntR."))
    assert _flagged(_scan(proto0))


def test_inflate_cap_is_not_scanned_error(tmp_path: Path) -> None:
    path = tmp_path / "bomb.pkl.gz"
    path.write_bytes(gzip.compress(pickle.dumps("A" * (4 << 20), protocol=4)))
    assert path.stat().st_size < 64 << 10
    found = _scan(path, limits=BinaryLimits(max_inflated_bytes=1 << 20))
    assert [(f.kind, f.severity) for f in found] == [("not-scanned", "error")]
    assert "inflates past" in found[0].message


def _torch_zip(tmp_path: Path) -> Path:
    path = tmp_path / "clean.pt"
    torch.save({"w": torch.arange(8, dtype=torch.float32)}, path)
    return path


def _rewrite(src: Path, dst: Path, replace: dict[str, bytes], add: dict[str, bytes]) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, replace.get(info.filename, zin.read(info)))
        for name, data in add.items():
            zout.writestr(name, data)


def test_pickle_in_a_member_of_any_name(tmp_path: Path) -> None:
    src = _torch_zip(tmp_path)
    dst = tmp_path / "x.pt"
    evil = pickle.dumps(Touch(tmp_path / "m"), protocol=2)
    _rewrite(src, dst, {}, {"clean/extra": evil, "clean/extra.gz": gzip.compress(evil)})
    found = _scan(dst)
    assert {f.extra["member"] for f in found if f.rule == "pickle.unsafe-import"} == {
        "clean/extra",
        "clean/extra.gz",
    }
    assert not [f for f in _scan(src) if f.severity == "error"]


def test_duplicate_data_pkl(tmp_path: Path) -> None:
    src = _torch_zip(tmp_path)
    marker = tmp_path / "ran"
    dst = tmp_path / "dup.pt"
    name = next(n for n in zipfile.ZipFile(src).namelist() if n.endswith("data.pkl"))
    with pytest.warns(UserWarning):
        _rewrite(src, dst, {}, {name: pickle.dumps(Touch(marker), protocol=2)})
    rules = {f.rule for f in _scan(dst)}
    assert {"zip.duplicate-member", "pickle.unsafe-import"} <= rules


def _patch(path: Path, find: bytes, replace: bytes, nth: int = 0) -> None:
    data = bytearray(path.read_bytes())
    at = -1
    for _ in range(nth + 1):
        at = data.index(find, at + 1)
    data[at : at + len(find)] = replace
    path.write_bytes(bytes(data))


def test_crc_mismatch_and_local_header_disagreement(tmp_path: Path) -> None:
    src = _torch_zip(tmp_path)
    crc = tmp_path / "crc.pt"
    crc.write_bytes(src.read_bytes())
    storage = next(n for n in zipfile.ZipFile(src).namelist() if n.endswith("data/0"))
    info = zipfile.ZipFile(src).getinfo(storage)
    with open(crc, "r+b") as fh:  # flip one byte of the stored tensor data
        fh.seek(info.header_offset + 30 + len(info.filename.encode()))
        fh.seek(struct.unpack("<H", open(src, "rb").read()[info.header_offset + 28 :][:2])[0], 1)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))
    assert "zip.bad-member" in {f.rule for f in _scan(crc)}
    renamed = tmp_path / "renamed.pt"
    renamed.write_bytes(src.read_bytes())
    _patch(renamed, storage.encode(), storage[:-1].encode() + b"9")  # the local header only
    found = _scan(renamed)
    assert {"zip.header-mismatch"} <= {f.rule for f in found if f.severity == "error"}


# The zip64 end record's "offset of the central directory" moved: zipfile shifts every
# member's local header by the difference. 1000 puts the early members before the file's
# start (the OS refuses the seek); 0x81 << 56 past what a C long holds (OverflowError).
@pytest.mark.parametrize("shift", [1000, 0x81 << 56], ids=["before-the-start", "past-a-long"])
def test_a_directory_that_puts_members_outside_the_file_names_them(
    tmp_path: Path, shift: int
) -> None:
    path = _torch_zip(tmp_path)
    data = bytearray(path.read_bytes())
    at = data.rindex(b"PK\x06\x06") + 48  # torch writes a zip64 end record: Python reads it
    struct.pack_into("<Q", data, at, (struct.unpack_from("<Q", data, at)[0] + shift) % (1 << 64))
    path.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="zip archive"):
        torch.load(path, weights_only=True)  # the loader cannot use it either
    found = _scan(path)
    outside = {
        f.extra["member"]: f.severity
        for f in found
        if f.rule == "zip.header-mismatch" and "outside the file" in f.message
    }
    assert outside.get("clean/data.pkl") == "error", found
    first = next(f for f in found if f.extra.get("member") == "clean/data.pkl")
    size = len(data)
    assert first.expected == f"an offset from 0 to {size - 1} (the file's {size} bytes)"
    assert first.observed is not None and int(first.observed) < 0  # before the start
    assert first.hint and "re-save" in first.hint
    # named for what it is: no "cannot read file", no parser safety net
    assert not {f.rule for f in found} & {"scan.unreadable", "scan.parse-failed"}, found


@pytest.mark.parametrize("moved", [False, True], ids=["control", "moved"])
def test_a_zip_inside_a_stream_whose_members_lie_outside_it_names_them(
    tmp_path: Path, moved: bool
) -> None:
    """The same directory, in a zip held in memory after gunzip: a member placed
    before the start is unreadable for that reason; the unmoved zip is judged whole."""
    data = bytearray(_torch_zip(tmp_path).read_bytes())
    if moved:
        at = data.rindex(b"PK\x06\x06") + 48
        struct.pack_into("<Q", data, at, struct.unpack_from("<Q", data, at)[0] + 1000)
    path = tmp_path / "weights.pt.gz"
    path.write_bytes(gzip.compress(bytes(data)))
    found = _scan(path)
    rules = {f.rule for f in found}
    assert "scan.parse-failed" not in rules, found
    unreadable = [f for f in found if f.rule == "scan.unreadable"]
    if moved:
        assert len(unreadable) == 1 and "outside the archive" in unreadable[0].message, found
        assert unreadable[0].severity == "error"
    else:
        assert unreadable == [], found
        assert "pickle.weights-as-pickle" in rules  # data.pkl was read and judged


@pytest.mark.parametrize(
    ("at_end", "says"),
    [(0, "outside the file"), (-1, "no local file header")],
    ids=["at-the-size", "last-byte"],
)
def test_a_plain_zip_whose_entry_points_at_its_last_byte_or_past_it(
    tmp_path: Path, at_end: int, says: str
) -> None:
    """The boundary: the directory of a plain zip (no zip64 record) gives the member's
    header at the file's size, or at its last byte. zipfile cannot read it either way;
    both are the member's error, neither is clean nor the parser's safety net."""
    path = tmp_path / "notes.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("notes.txt", "hello")
    data = bytearray(path.read_bytes())
    entry = data.index(b"PK\x01\x02")  # the member's central directory entry
    struct.pack_into("<L", data, entry + 42, len(data) + at_end)
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as zf, pytest.raises((zipfile.BadZipFile, OSError, ValueError)):
        zf.read("notes.txt")  # what a reader gets
    found = _scan(path)
    rows = [f for f in found if f.rule == "zip.header-mismatch" and says in f.message]
    assert len(rows) == 1 and rows[0].severity == "error", found
    assert rows[0].extra["member"] == "notes.txt"
    assert not {f.rule for f in found} & {"scan.unreadable", "scan.parse-failed"}, found


def test_legacy_torch_tar(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "old.pt"
    members = {
        "sys_info": pickle.dumps({"protocol_version": 1000, "little_endian": True}, protocol=2),
        "storages": pickle.dumps(0, protocol=2) + pickle.dumps([], protocol=2),
        "tensors": pickle.dumps(0, protocol=2),
        "pickle": pickle.dumps({"w": Touch(marker)}, protocol=2),
    }
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, __import__("io").BytesIO(data))
    assert _runs(lambda: torch.load(path, weights_only=False), marker)
    found = _scan(path)
    assert _flagged(found)
    assert {f.extra["member"] for f in found if f.rule == "pickle.unsafe-import"} == {"pickle"}


def test_memory_bounded_for_a_huge_pickle_string(tmp_path: Path) -> None:
    path = tmp_path / "big.pt"
    blob = pickle.dumps({"s": "x" * (48 << 20) + " AKIAIOSFODNN7EXAMPLQ"}, protocol=4)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", blob)
    del blob
    tracemalloc.start()
    try:
        found = _scan(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"peak {peak >> 20} MiB"
    assert any(f.kind == "secret" for f in found)
