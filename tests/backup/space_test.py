"""Backup and restore refuse up front when the files cannot fit, writing nothing."""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from ftmanifest.backup.errors import BackupInputError

from .conftest import Keys, backup, restore_meta

Usage = namedtuple("Usage", "total used free")


def _tiny_disk(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**12, 10**12 - free, free))


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "run"
    src.mkdir()
    (src / "weights.bin").write_bytes(b"w" * 50_000)
    return src


def test_backup_refuses_when_the_target_is_full(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _source(tmp_path)
    _tiny_disk(monkeypatch, 10_000)
    with pytest.raises(BackupInputError, match="not enough free space") as err:
        backup(keys, [src], tmp_path / "backups")
    assert err.value.observed == "10000 bytes free"
    assert list((tmp_path / "backups").iterdir()) == []


def test_restore_refuses_when_the_destination_is_full(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    _tiny_disk(monkeypatch, 49_999)
    with pytest.raises(BackupInputError, match="not enough free space"):
        restore_meta(keys, made.meta_path, tmp_path / "out" / "dest")
    assert list((tmp_path / "out").iterdir()) == []
    monkeypatch.undo()
    restore_meta(keys, made.meta_path, tmp_path / "out" / "dest")
    assert (tmp_path / "out" / "dest" / "run" / "weights.bin").stat().st_size == 50_000
