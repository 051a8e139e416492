"""``backup create`` and ``backup check`` are subcommands: a folder
named ``check`` is backed up like any other, and the old ``backup PATHS...`` still
creates, with a note on stderr."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ftmanifest.cli import main, old_spelling

from .conftest import Keys


def _create(keys: Keys, paths: list[str], to: Path, *, new: bool = True) -> list[str]:
    head = ["backup", "create"] if new else ["backup"]
    return [*head, *paths, "--to", str(to), "--key", str(keys.signing_path),
            "-r", keys.recipient.text, "--format", "json"]  # fmt: skip


def test_a_folder_named_check_is_backed_up_with_backup_create(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "check").mkdir()
    (tmp_path / "check" / "notes.txt").write_text("a folder named check\n")
    monkeypatch.chdir(tmp_path)
    assert main(_create(keys, ["check"], tmp_path / "out")) == 0
    made = json.loads(capsys.readouterr().out)
    assert Path(made["archive"]).exists()
    argv = ["backup", "check", str(tmp_path / "out"), "--trust", str(keys.trust_path),
            "--read-data", "-i", str(keys.identity_path), "--format", "json"]  # fmt: skip
    assert main(argv) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["ok"] and checked["backups"][0]["data_read"]
    assert checked["backups"][0]["backup_id"] == made["backup_id"]


def test_the_old_spelling_still_creates_with_a_note(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "run"
    src.mkdir()
    (src / "log.txt").write_text("loss 0.5\n")
    assert main(_create(keys, [str(src)], tmp_path / "out", new=False)) == 0
    out = capsys.readouterr()
    assert "deprecated" in out.err and "backup create" in out.err
    assert Path(json.loads(out.out)["archive"]).exists()


def test_old_spelling_rewrites_only_a_backup_without_its_action() -> None:
    assert old_spelling(["backup", "out/", "--to", "b"]) == [
        "backup",
        "create",
        "out/",
        "--to",
        "b",
    ]
    assert old_spelling(["backup", "--to", "b", "out/"])[:2] == ["backup", "create"]
    for argv in (["backup", "check", "b"], ["backup", "create", "check"], ["backup", "-h"],
                 ["backup"], ["verify", "m.yaml"], ["--version"]):  # fmt: skip
        assert old_spelling(argv) == argv


def test_check_and_create_take_only_their_own_options(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "b"
    folder.mkdir()
    with pytest.raises(SystemExit) as caught:
        main(["backup", "check", str(folder), "--to", str(tmp_path)])
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        main(_create(keys, [str(folder)], tmp_path / "out") + ["--read-data"])
    assert caught.value.code == 2
    assert main(["backup", "check", str(folder), str(folder)]) == 2
    capsys.readouterr()


def test_the_console_script_takes_both_subcommands(keys: Keys, tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "check").mkdir()
    (tmp_path / "check" / "a.txt").write_text("x\n")
    env = {**os.environ, "FTMANIFEST_DEBUG": "0"}
    run = [sys.executable, "-m", "ftmanifest"]
    made = subprocess.run([*run, *_create(keys, ["check"], tmp_path / "out")], cwd=tmp_path,
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    checked = subprocess.run([*run, "backup", "check", "out", "--trust", str(keys.trust_path)],
                             cwd=tmp_path, env=env, capture_output=True, text=True)  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert "1 backup(s), 0 refused" in checked.stdout
