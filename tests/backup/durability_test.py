"""The archive reaches the disk before the metadata that vouches for it.

``os.fsync`` is wrapped to record which file each call syncs (the descriptor
read back through /proc/self/fd): the archive's bytes, then the folder that
links it, then the metadata.  After a power cut, signed metadata never names an
archive whose bytes were only in the page cache.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import backup, restore_meta

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd to name a descriptor's file"
)


def _record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    real = os.fsync
    synced: list[str] = []

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd if isinstance(fd, int) else fd.fileno()}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


@pytest.mark.parametrize("how", ["recipients", "passphrase"])
def test_the_archive_is_synced_before_its_metadata(keys, tmp_path, monkeypatch, how):
    src = tmp_path / "in"
    src.mkdir()
    (src / "w.bin").write_bytes(os.urandom(200_000))
    out = tmp_path / "backups"
    synced = _record_fsyncs(monkeypatch)
    kw = {"passphrase": "a long passphrase"} if how == "passphrase" else {}
    made = backup(keys, [src], out, **kw)
    folder = str(out.resolve())
    archive = [i for i, p in enumerate(synced) if p.endswith(".age.tmp") or p == str(made.archive)]
    meta = [i for i, p in enumerate(synced) if ".meta.json" in Path(p).name]
    assert archive, f"the archive was never fsynced: {synced}"
    assert meta, synced
    first_meta = meta[0]
    assert archive[0] < first_meta, synced
    dir_syncs = [i for i, p in enumerate(synced) if p == folder]
    assert any(archive[0] < i < first_meta for i in dir_syncs), (
        f"the folder was not fsynced after the archive was linked, before the metadata: {synced}"
    )


def test_every_restored_file_is_synced_before_the_folder_is_renamed(keys, tmp_path, monkeypatch):
    """The fsyncs run on their own threads now; each file is still durable
    before DEST appears, and none is synced after the rename.  Without syncfs
    (small files share one where it exists: tests/backup/restore_durable_test.py)."""
    import ftmanifest.backup.restore as restoring

    monkeypatch.setattr(restoring, "_find_syncfs", lambda: None)

    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    names = [f"f{i}.bin" for i in range(150)]  # more than the fsync threads hold at once
    for n in names:
        (src / "sub" / n).write_bytes(os.urandom(3000))
    (src / "big.bin").write_bytes(os.urandom(20 << 20))  # several write-back ranges
    made = backup(keys, [src], tmp_path / "backups")
    synced = _record_fsyncs(monkeypatch)
    renamed: list[int] = []
    real_rename = os.rename

    def rename(*a, **kw):
        renamed.append(len(synced))
        return real_rename(*a, **kw)

    monkeypatch.setattr(restoring.os, "rename", rename)
    dest = tmp_path / "dest"
    restore_meta(keys, made.meta_path, dest)
    assert renamed, "restore never renamed its staging folder into place"
    before = [Path(p).name for p in synced[: renamed[0]]]
    for n in [*names, "big.bin"]:
        assert n in before, f"{n} was not fsynced before DEST appeared: {sorted(before)[:5]}"
    assert (dest / "in" / "big.bin").read_bytes() == (src / "big.bin").read_bytes()


def test_write_back_is_started_for_every_range_written(tmp_path, monkeypatch):
    """``Writeback`` asks the kernel to start writing each 8 MiB as it is
    written and the rest when told; it changes nothing a reader sees."""
    from ftmanifest.backup import pipe

    advised: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, adv: advised.append((off, n)))
    path = tmp_path / "out"
    with path.open("wb", buffering=0) as fh:
        w = pipe.Writeback(fh.fileno())
        data = os.urandom(1 << 20)
        for _ in range(20):
            fh.write(data)
            w.wrote(len(data))
        w.flush_started()
    assert advised[0] == (0, pipe.WRITEBACK)
    covered = sum(n for _, n in advised)
    assert covered == 20 << 20 and [o for o, _ in advised] == sorted({o for o, _ in advised})
    assert path.read_bytes() == data * 20


@pytest.mark.parametrize("failing", ["f17.bin", "f9.bin"])  # amid the files; the last one
def test_a_file_that_cannot_be_synced_fails_the_restore(keys, tmp_path, monkeypatch, failing):
    """An fsync error on one of the fsync threads is the restore's error: DEST
    never appears and no staging folder is left (each file fsynced: no syncfs)."""
    import errno

    import ftmanifest.backup.restore as restoring

    monkeypatch.setattr(restoring, "_find_syncfs", lambda: None)

    from .conftest import no_staging

    src = tmp_path / "in"
    src.mkdir()
    for i in range(40):
        (src / f"f{i}.bin").write_bytes(os.urandom(2000))
    made = backup(keys, [src], tmp_path / "backups")
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(failing):
            raise OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    dest = tmp_path / "dest"
    with pytest.raises(OSError) as caught:
        restore_meta(keys, made.meta_path, dest)
    assert "Input/output error" in str(caught.value)
    assert not dest.exists()
    no_staging(dest)
