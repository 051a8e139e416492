"""Large restored files are written with O_DIRECT where the file system takes it.

The bytes go from aligned buffers straight to the disk (a buffered write
copied every byte into fresh page-cache pages first, most of restore's
system time on a virtual machine); the unaligned tail, holes, and a file
system that refuses a direct write all still give the file's exact bytes,
and every such file is fsynced before the folder is renamed into place.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

from ftmanifest.backup import restore as restore_module

from .conftest import backup, restore_meta, tree_of
from .restore_durable_test import _watch

_O_DIRECT = getattr(os, "O_DIRECT", 0)


def _direct_here(folder: Path) -> bool:
    probe = folder / "probe"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        return restore_module._try_direct(fd)
    finally:
        os.close(fd)
        probe.unlink()


def _source(tmp_path: Path) -> Path:
    """Three large files: an unaligned tail, a hole of whole blocks, an
    unaligned size whose last block is a partial one of zeros."""
    src = tmp_path / "run"
    src.mkdir()
    big = restore_module.BLOCK_BYTES
    (src / "tail.bin").write_bytes(os.urandom(3 * big + 1234))
    with open(src / "holey.bin", "wb") as fh:
        fh.write(os.urandom(big))
        fh.seek(4 * big, os.SEEK_CUR)  # four whole blocks of zeros
        fh.write(os.urandom(big // 2 + 7))
    (src / "zero-tail.bin").write_bytes(os.urandom(2 * big) + bytes(5000))
    (src / "small.txt").write_text("small\n")
    return src


@pytest.fixture
def direct_fs(tmp_path: Path) -> None:
    if not _O_DIRECT:
        pytest.skip("this platform has no O_DIRECT: every file is written buffered")
    if not _direct_here(tmp_path):
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT (tmpfs?): nothing to test")


def test_large_files_go_direct_and_keep_their_bytes_and_holes(
    keys, tmp_path, monkeypatch, direct_fs
):
    src = _source(tmp_path)
    made: list[str] = []
    real = restore_module._DirectFile.__init__

    def note(self, fd, entry, *args):  # type: ignore[no-untyped-def]
        made.append(entry.path)
        real(self, fd, entry, *args)

    monkeypatch.setattr(restore_module._DirectFile, "__init__", note)
    created = backup(keys, [src], tmp_path / "backups")
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    out = tmp_path / "dest" / "run"
    assert sorted(made) == ["run/holey.bin", "run/tail.bin", "run/zero-tail.bin"]
    assert tree_of(out) == tree_of(src)
    st = (out / "holey.bin").stat()
    assert st.st_blocks * 512 < st.st_size - 3 * restore_module.BLOCK_BYTES  # the hole stayed


def test_a_file_system_refusing_a_direct_write_gets_the_bytes_buffered(
    keys, tmp_path, monkeypatch, direct_fs
):
    """EINVAL on a direct write (a stricter alignment, a file system that says
    yes to the flag and no to the write): the flag is cleared and the same
    bytes are written buffered."""
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    real_write = os.write
    refused: list[int] = []

    def write(fd: int, data) -> int:  # type: ignore[no-untyped-def]
        try:
            direct = fcntl.fcntl(fd, fcntl.F_GETFL) & _O_DIRECT
        except OSError:
            direct = 0
        if direct:
            refused.append(fd)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    monkeypatch.setattr(os, "write", real_write)
    assert refused  # the direct path was tried and refused
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


def test_direct_files_are_fsynced_before_the_rename(keys, tmp_path, monkeypatch, direct_fs):
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    events = _watch(monkeypatch, syncfs_available=True)  # every fsync, syncfs and rename
    watched = os.fsync

    def fsync(fd: int) -> None:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & _O_DIRECT:
            events.append("fsync-direct")
        watched(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    # tail.bin's flag is cleared for its tail; the other two end on whole blocks
    # or a hole, so at least those keep it until their fsync
    assert events.count("fsync-direct") >= 1
    assert events.index("rename") > max(i for i, e in enumerate(events) if e == "fsync-direct")
