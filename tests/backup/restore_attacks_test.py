"""Restore writes only inside DEST, only what it made.

A DEST that holds the backups folder (or lies inside it) is refused before
anything is moved: ``--force`` would otherwise delete the backup being
restored.  Restore works through directory descriptors held open from the
start, so a parent folder swapped for a symlink while it runs redirects
nothing; when the path to DEST no longer leads to the folder it wrote in,
restore refuses and removes its staging folder.  A staging folder left by a
restore killed with -9 is removed by the next restore of that DEST, and only
folders that are ours (our name pattern, our user).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ftmanifest.backup import members as members_module
from ftmanifest.backup.errors import DestinationMovedError, DestinationOverlapError
from ftmanifest.cli import main

from .conftest import Keys, backup, restore_meta, tree_of


def _source(root: Path, files: int = 6) -> Path:
    src = root / "src"
    (src / "sub").mkdir(parents=True)
    for i in range(files):
        (src / "sub" / f"f{i}.txt").write_bytes(f"genuine {i}\n".encode())
    return src


def _restore_cli(keys: Keys, meta_path: Path, dest: Path, capsys, *extra: str) -> tuple[int, dict]:
    argv = ["restore", str(meta_path), "--to", str(dest), "-i", str(keys.identity_path),
            "--trust", str(keys.trust_path), "--format", "json", *extra]  # fmt: skip
    code = main(argv)
    return code, json.loads(capsys.readouterr().out or "{}")


# -- 8. a DEST that holds (or is inside) the backups -------------------------------


@pytest.mark.parametrize("where", ["parent-of-folder", "the-folder", "inside-folder", "link"])
def test_a_destination_overlapping_the_backups_is_refused(keys, tmp_path, capsys, where):
    backups = tmp_path / "store" / "backups"
    one = backup(keys, [_source(tmp_path / "in-1")], backups)
    two = backup(keys, [_source(tmp_path / "in-2")], backups)
    dest = {
        "parent-of-folder": tmp_path / "store",
        "the-folder": backups,
        "inside-folder": backups / "restored",
        "link": tmp_path / "via-link",
    }[where]
    if where == "link":
        os.symlink(tmp_path / "store", dest)
        dest = dest / "backups"
    before = tree_of(tmp_path / "store")
    code, doc = _restore_cli(keys, one.meta_path, dest, capsys, "--force")
    assert code == 1, doc
    error = doc["error"]
    assert error["reason"] == "destination-overlaps-backup"
    assert error["field"] == "--out"
    assert str(backups) in error["observed"] and "outside" in error["expected"]
    assert "--out" in error["hint"]
    assert tree_of(tmp_path / "store") == before
    assert one.archive.is_file() and two.archive.is_file()
    with pytest.raises(DestinationOverlapError):
        restore_meta(keys, one.meta_path, dest, force=True)


def test_a_destination_beside_the_backups_is_fine(keys, tmp_path):
    backups = tmp_path / "store" / "backups"
    made = backup(keys, [_source(tmp_path / "in")], backups)
    restore_meta(keys, made.meta_path, tmp_path / "store" / "backups-restored")
    assert (tmp_path / "store" / "backups-restored" / "src" / "sub" / "f0.txt").is_file()


# -- 9. DEST's parent swapped for a symlink while restore runs ------------------


def _swap_after_first_file(monkeypatch, parent: Path, moved: Path, attacker: Path) -> list[str]:
    """Between the first and the second file, rename ``parent`` away, mirror
    what is in it into ``attacker`` (the staging folder's name included, with
    the attacker's bytes in the files) and put a symlink to ``attacker`` where
    ``parent`` was."""
    real = members_module._copy
    calls: list[str] = []

    def copy(tar, entry, sink, where, progress):
        calls.append(entry.path)
        if len(calls) == 2:
            os.rename(parent, moved)
            shutil.copytree(moved, attacker, symlinks=True, dirs_exist_ok=True)
            for dirpath, _, files in os.walk(attacker):
                for name in files:
                    Path(dirpath, name).write_bytes(b"attacker's bytes\n")
            os.symlink(attacker, parent)
        return real(tar, entry, sink, where, progress)

    monkeypatch.setattr(members_module, "_copy", copy)
    return calls


def test_a_parent_swapped_for_a_symlink_redirects_nothing(keys, tmp_path, monkeypatch):
    made = backup(keys, [_source(tmp_path / "in")], tmp_path / "backups")
    parent, moved, attacker = tmp_path / "work", tmp_path / "work-moved", tmp_path / "attacker"
    parent.mkdir()
    attacker.mkdir()
    calls = _swap_after_first_file(monkeypatch, parent, moved, attacker)
    with pytest.raises(DestinationMovedError) as caught:
        restore_meta(keys, made.meta_path, parent / "dest")
    assert len(calls) == 6, "every file was read"
    err = caught.value
    assert err.reason == "destination-moved" and err.exit_code == 1
    assert err.path == str(parent / "dest") and err.field == "--out"
    assert err.expected and err.observed and err.hint
    # the attacker's folder holds only what the attacker put there: restore wrote
    # nothing in it, made no DEST there, and left no decrypted staging anywhere
    assert not (attacker / "dest").exists()
    for dirpath, _, files in os.walk(attacker):
        for name in files:
            assert Path(dirpath, name).read_bytes() == b"attacker's bytes\n"
    assert os.listdir(moved) == [], "the staging folder was removed from the folder held open"
    leaked = [
        Path(d, f)
        for d, _, fs in os.walk(tmp_path)
        for f in fs
        if Path(d, f).read_bytes().startswith(b"genuine") and "in" not in Path(d).parts[-3:]
    ]
    assert leaked == [], f"decrypted files outside the source: {leaked}"


def test_without_a_swap_only_dest_is_left(keys, tmp_path):
    """Without the swap the same restore succeeds: descriptors change nothing else."""
    made = backup(keys, [_source(tmp_path / "in")], tmp_path / "backups")
    (tmp_path / "work").mkdir()
    restore_meta(keys, made.meta_path, tmp_path / "work" / "dest")
    assert tree_of(tmp_path / "work" / "dest" / "src") == tree_of(tmp_path / "in" / "src")
    assert os.listdir(tmp_path / "work") == ["dest"]


# -- staging left by a restore killed with -9 ---------------------------------------


def _leftover(parent: Path, name: str) -> Path:
    left = parent / name
    (left / "src").mkdir(parents=True)
    (left / "src" / "decrypted.txt").write_bytes(b"secret plaintext\n")
    os.chmod(left, 0o700)
    return left


def test_the_next_restore_removes_our_stale_staging_only(keys, tmp_path):
    made = backup(keys, [_source(tmp_path / "in")], tmp_path / "backups")
    work = tmp_path / "work"
    work.mkdir()
    ours = _leftover(work, ".dest.restore-ab12cd34")
    other_dest = _leftover(work, ".other.restore-ab12cd34")
    not_our_pattern = _leftover(work, ".dest.restore-keep-me-please")
    (work / ".dest.restore-file0000").write_bytes(b"a file, not our folder")
    os.symlink(other_dest, work / ".dest.restore-link0000")
    restore_meta(keys, made.meta_path, work / "dest")
    assert not ours.exists()
    assert (other_dest / "src" / "decrypted.txt").is_file()
    assert (not_our_pattern / "src" / "decrypted.txt").is_file()
    assert (work / ".dest.restore-file0000").is_file()
    assert (work / ".dest.restore-link0000").is_symlink()


def test_a_stale_staging_folder_of_another_user_is_kept(keys, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root: only root can make a folder owned by another user")
    made = backup(keys, [_source(tmp_path / "in")], tmp_path / "backups")
    work = tmp_path / "work"
    work.mkdir()
    theirs = _leftover(work, ".dest.restore-ab12cd34")
    os.chown(theirs, 12345, 12345)
    restore_meta(keys, made.meta_path, work / "dest")
    assert (theirs / "src" / "decrypted.txt").is_file()


_KILLED = """
import os, signal, sys
from ftmanifest.backup import members
real, seen = members._copy, []
def copy(*args):
    seen.append(args)
    if len(seen) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args)
members._copy = copy
from ftmanifest.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_restore_killed_midway_is_named_by_check_and_cleaned_by_the_next(keys, tmp_path, capsys):
    """kill -9 between two files: the decrypted staging folder is left; backup
    check names it (a warning: the backups are sound), the next restore of
    that DEST removes it, and check no longer names it."""
    import signal
    import subprocess
    import sys

    made = backup(keys, [_source(tmp_path / "in")], tmp_path / "backups")
    work = tmp_path / "work"
    work.mkdir()
    argv = ["restore", str(made.meta_path), "--to", str(work / "dest"), "-i",
            str(keys.identity_path), "--trust", str(keys.trust_path)]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", _KILLED, *argv], timeout=120)
    assert done.returncode == -signal.SIGKILL
    (left,) = [p for p in os.listdir(work) if p.startswith(".dest.restore-")]
    check = ["backup", "check", str(tmp_path / "backups"), "--trust", str(keys.trust_path),
             "--format", "json"]  # fmt: skip
    assert main(check) == 0
    (finding,) = json.loads(capsys.readouterr().out)["findings"]
    assert finding["rule"] == "backup.restore-interrupted" and finding["severity"] == "warning"
    assert finding["path"] == str(work / left)
    assert "decrypted" in finding["message"] and str(work / "dest") in finding["hint"]
    assert main(argv) == 0
    capsys.readouterr()
    assert sorted(os.listdir(work)) == ["dest"]
    assert main(check) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
