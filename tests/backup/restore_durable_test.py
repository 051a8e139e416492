"""Every restored file is durable before the staging folder is renamed to DEST.

Large files are fsynced one by one (written with O_DIRECT, or their
write-back started as they are written); small files are made durable
together by one ``syncfs`` of the staging folder's file system, and where
there is no ``syncfs`` each is fsynced.
The order is checked: nothing is renamed into place before the syncs returned.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ftmanifest.backup import restore as restore_module

from .conftest import backup, restore_meta, tree_of


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "run"
    (src / "sub").mkdir(parents=True)
    for i in range(20):
        (src / "sub" / f"s{i}.txt").write_text(f"small {i}\n")
    (src / "big.bin").write_bytes(os.urandom(restore_module.SMALL + 4096))
    return src


def _watch(monkeypatch: pytest.MonkeyPatch, syncfs_available: bool) -> list[str]:
    events: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    def rename(*args, **kwargs):  # type: ignore[no-untyped-def]
        events.append("rename")
        return real_rename(*args, **kwargs)

    monkeypatch.setattr(restore_module.os, "fsync", fsync)
    monkeypatch.setattr(restore_module.os, "rename", rename)
    if syncfs_available:
        real = restore_module._find_syncfs()
        if real is None:
            pytest.skip("no syncfs in this libc")

        def syncfs(fd: int) -> int:
            events.append("syncfs")
            return real(fd)

        monkeypatch.setattr(restore_module, "_find_syncfs", lambda: syncfs)
    else:
        monkeypatch.setattr(restore_module, "_find_syncfs", lambda: None)
    return events


def _restored(keys, tmp_path: Path, monkeypatch, *, syncfs_available: bool) -> list[str]:
    """Back up a tree, restore it with the syncs watched; the events, in order."""
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    events = _watch(monkeypatch, syncfs_available)
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)
    return events


def test_small_files_share_one_syncfs_before_the_rename(keys, tmp_path, monkeypatch):
    events = _restored(keys, tmp_path, monkeypatch, syncfs_available=True)
    assert events.count("syncfs") == 1 and events.count("fsync") >= 1  # the big file's own
    assert events.count("fsync") < 20
    assert events.index("syncfs") < events.index("rename")


def test_without_syncfs_every_file_is_fsynced_before_the_rename(keys, tmp_path, monkeypatch):
    events = _restored(keys, tmp_path, monkeypatch, syncfs_available=False)
    first_rename = events.index("rename")
    assert events[:first_rename].count("fsync") == 21 and "syncfs" not in events


def test_a_failed_syncfs_refuses_and_leaves_no_destination(keys, tmp_path, monkeypatch):
    src = _source(tmp_path)
    created = backup(keys, [src], tmp_path / "backups")
    if restore_module._find_syncfs() is None:
        pytest.skip("no syncfs in this libc")
    monkeypatch.setattr(restore_module, "_find_syncfs", lambda: lambda fd: -1)
    with pytest.raises(OSError):
        restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dest")] == []
