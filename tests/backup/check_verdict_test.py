"""``backup check --read-data`` and ``restore`` reach one verdict by one code.

The index is judged by ``index.parse_entries`` for both: a name over 255
bytes, or a file that is also a folder, is refused by both; a deep tree (one
whose paths pass PATH_MAX below DEST) is restored through directory
descriptors, so both accept it.  A folder whose metadata is all gone is not
"nothing to check": each archive without metadata is an error, and a check
that verified no backup never says OK.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ftmanifest.backup.errors import IndexMismatchError
from ftmanifest.cli import main

from .conftest import (
    Keys,
    Member,
    backup,
    entry_for,
    hostile_backup,
    no_staging,
    restore_meta,
)


def _check(keys: Keys, folder: Path, capsys, *extra: str) -> tuple[int, dict]:
    argv = ["backup", "check", str(folder), "--trust", str(keys.trust_path), "--format", "json"]
    code = main([*argv, *extra])
    return code, json.loads(capsys.readouterr().out)


def _read_data(keys: Keys, folder: Path, capsys) -> tuple[int, dict]:
    return _check(keys, folder, capsys, "--read-data", "-i", str(keys.identity_path))


# -- 11. one verdict ----------------------------------------------------------------


def _deep(root: Path, part: str, depth: int) -> Path:
    """A real tree ``depth`` folders deep; returns its top."""
    top = root / "deep"
    here = top
    for _ in range(depth):
        here = here / part
    here.mkdir(parents=True)
    (here / "leaf.txt").write_bytes(b"at the bottom\n")
    return top


def test_a_deep_tree_check_passes_is_also_restored(keys, tmp_path, capsys):
    """Paths of ~3,800 bytes below the source; DEST's own path pushes them
    over PATH_MAX (4096), which restore never builds as one string."""
    top = _deep(tmp_path, "d" * 200, 19)
    made = backup(keys, [top], tmp_path / "backups")
    code, report = _read_data(keys, tmp_path / "backups", capsys)
    assert code == 0 and report["backups"][0]["data_read"] is True
    dest = tmp_path / ("restored-" + "r" * 240) / "dest"
    restore_meta(keys, made.meta_path, dest)
    assert _fd_tree(dest / "deep") == _fd_tree(top) != {}


def _fd_tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file below ``root`` (mode, bytes), walked through descriptors:
    the paths below are longer than one system call takes."""
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    out: dict[str, tuple[int, bytes]] = {}
    try:
        for here, _, files, fd in os.fwalk(".", dir_fd=top):
            for name in files:
                f = os.open(name, os.O_RDONLY, dir_fd=fd)
                with os.fdopen(f, "rb") as fh:
                    out[f"{here}/{name}"] = (os.fstat(f).st_mode & 0o777, fh.read())
    finally:
        os.close(top)
    return out


def _name_cases() -> dict[str, tuple[list[Member], list, str]]:
    long_path = "/".join(["p" * 200] * 20)  # 4,019 characters, every name <= 255 bytes
    return {
        "file-with-a-child": (
            [Member("a", b"x"), Member("a/b", b"y")],
            [entry_for("a", b"x"), entry_for("a/b", b"y")],
            "entries[1].path",
        ),
        "300-character-name": (
            [Member("n" * 300, b"x")],
            [entry_for("n" * 300, b"x")],
            "entries[0].path",
        ),
        "4000-character-name": (
            [Member("m" * 4000, b"x")],
            [entry_for("m" * 4000, b"x")],
            "entries[0].path",
        ),
        "4000-character-path": ([Member(long_path, b"ok")], [entry_for(long_path, b"ok")], ""),
    }


@pytest.mark.parametrize("case", list(_name_cases()))
def test_check_and_restore_agree_on_a_signed_index(keys, tmp_path, capsys, monkeypatch, case):
    members, entries, field = _name_cases()[case]
    meta_path = hostile_backup(tmp_path / "backups", keys, members, entries=entries)
    code, report = _read_data(keys, tmp_path / "backups", capsys)
    dest = tmp_path / "work" / "dest"
    (tmp_path / "work").mkdir()
    if not field:  # a long path of short names: both accept it
        assert code == 0, report
        restore_meta(keys, meta_path, dest)
        monkeypatch.chdir(dest)  # relative: under xdist tmp_path + 4,000 chars passes PATH_MAX
        assert Path(entries[0].path).read_bytes() == b"ok"
        return
    assert code == 1, report
    (finding,) = report["backups"][0]["findings"]
    with pytest.raises(IndexMismatchError) as caught:
        restore_meta(keys, meta_path, dest)
    no_staging(dest)
    err = caught.value
    assert finding["rule"] == f"backup.{err.reason}" == "backup.index-mismatch"
    assert finding["message"] == err.message
    assert err.field == field == finding["field"]
    assert err.expected and err.observed and err.hint
    assert err.exit_code == 1


def test_the_judge_names_the_file_that_has_a_child():
    from ftmanifest.backup.index_read import parse_entries

    with pytest.raises(IndexMismatchError) as caught:
        parse_entries([entry_for("a", b"x").to_dict(), entry_for("a/b", b"y").to_dict()], "here")
    assert caught.value.observed and "'a'" in caught.value.observed


# -- 12. nothing verified is never OK -----------------------------------------------


def test_every_metadata_gone_is_a_refusal(keys, tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    (src / "w.bin").write_bytes(os.urandom(1000))
    one = backup(keys, [src], tmp_path / "backups")
    two = backup(keys, [src], tmp_path / "backups", passphrase="a long passphrase")
    one.meta_path.unlink()
    two.meta_path.unlink()
    code, report = _check(keys, tmp_path / "backups", capsys)
    assert code == 1 and report["ok"] is False
    archives = [f for f in report["findings"] if f["path"].endswith((".age",))]
    by_path = {f["path"]: f for f in archives}
    finding = by_path[str(one.archive)]
    assert finding["rule"] == "backup.metadata-mismatch" and finding["severity"] == "error"
    assert finding["field"] == "metadata"
    assert finding["expected"] == one.meta_path.name and finding["observed"] == "missing"
    assert "delete" in finding["hint"] and "another copy" in finding["hint"]
    assert by_path[str(two.archive)]["severity"] == "error"
    main(["backup", "check", str(tmp_path / "backups"), "--trust", str(keys.trust_path)])
    text = capsys.readouterr().out
    assert "ok " not in text and "no backup verified" in text


def test_an_empty_folder_verifies_nothing(keys, tmp_path, capsys):
    (tmp_path / "backups").mkdir()
    code, report = _check(keys, tmp_path / "backups", capsys)
    assert code == 1 and report["ok"] is False
    (finding,) = report["findings"]
    assert finding["rule"] == "backup.nothing-verified" and finding["severity"] == "error"
