"""The archive reaches the disk before the metadata that vouches for it (issue 28, item 10).

``os.fsync`` is wrapped to record which file each call syncs (the descriptor
read back through /proc/self/fd): the archive's bytes, then the folder that
links it, then the metadata.  After a power cut, signed metadata never names an
archive whose bytes were only in the page cache.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import backup

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
