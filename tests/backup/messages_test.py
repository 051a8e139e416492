"""Exit codes and reasons as the guide's table says.

A file that changes between the walk and its read is ``source-changed`` (exit 1),
like one that changes while it is read; tampered or truncated metadata is
``metadata-mismatch`` (exit 1), not the signing layer's ``malformed-envelope``
(exit 2); a new backup's passphrase that is blank or short is refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ftmanifest.backup import create, index
from ftmanifest.backup.errors import SourceChangedError
from ftmanifest.cli import main

from .conftest import Keys, backup


def _source(root: Path) -> Path:
    src = root / "in"
    src.mkdir()
    (src / "w.bin").write_bytes(os.urandom(100_000))
    return src


def test_a_file_changing_after_the_walk_is_source_changed(keys, tmp_path, monkeypatch):
    src = _source(tmp_path)
    real = index.build

    def walk_then_grow(paths):
        walked = real(paths)
        with open(src / "w.bin", "ab") as fh:
            fh.write(b"more")
        return walked

    monkeypatch.setattr(index, "build", walk_then_grow)
    monkeypatch.setattr(create, "build", walk_then_grow)  # the name create imported
    with pytest.raises(SourceChangedError) as caught:
        backup(keys, [src], tmp_path / "backups")
    err = caught.value
    assert err.reason == "source-changed" and err.exit_code == 1
    assert err.path == str(src / "w.bin") and err.observed and err.hint
    assert not (tmp_path / "backups").exists() or list((tmp_path / "backups").iterdir()) == []


@pytest.mark.parametrize("damage", ["truncated", "renamed-field", "not-json"])
def test_damaged_metadata_is_a_metadata_mismatch(keys, tmp_path, capsys, damage):
    made = backup(keys, [_source(tmp_path)], tmp_path / "backups")
    raw = made.meta_path.read_bytes()
    if damage == "truncated":
        raw = raw[: len(raw) // 2]
    elif damage == "renamed-field":  # one byte, still JSON; a flip inside the payload
        raw = raw.replace(b'"payloadType"', b'"payloadTypf"')  # is bad-signature (exit 1)
    else:
        raw = b"not json at all\n"
    made.meta_path.write_bytes(raw)
    trust = ["--trust", str(keys.trust_path), "--format", "json"]
    argv = ["restore", str(made.archive), "--to", str(tmp_path / "dest"),
            "-i", str(keys.identity_path), *trust]  # fmt: skip
    assert main(argv) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["reason"] == "metadata-mismatch", error
    assert error["path"] == str(made.meta_path)
    assert error["expected"] and error["observed"] and error["hint"]
    assert "re-sign" not in error["hint"]
    assert main(["backup", "check", str(tmp_path / "backups"), *trust]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["rule"] for f in report["backups"][0]["findings"]] == ["backup.metadata-mismatch"]


@pytest.mark.parametrize("passphrase", ["   ", "", "\t \n", "short"])
def test_a_blank_or_short_passphrase_is_refused(keys: Keys, tmp_path, capsys, monkeypatch,
                                               passphrase):  # fmt: skip
    monkeypatch.setenv("BACKUP_PW", passphrase)
    src = _source(tmp_path)
    argv = ["backup", "create", str(src), "--to", str(tmp_path / "backups"), "--key",
            str(keys.signing_path), "--passphrase-env", "BACKUP_PW"]  # fmt: skip
    assert main([*argv, "--format", "json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["field"] == "--archive-passphrase-env"
    assert "8" in error["expected"] and error["observed"] and error["hint"]
    assert passphrase.strip() == "" or passphrase not in error["observed"]
    assert not (tmp_path / "backups").exists()


def test_a_good_passphrase_is_accepted(keys: Keys, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BACKUP_PW", "  eight ch  ")
    src = _source(tmp_path)
    argv = ["backup", "create", str(src), "--to", str(tmp_path / "backups"), "--key",
            str(keys.signing_path), "--passphrase-env", "BACKUP_PW"]  # fmt: skip
    assert main(argv) == 0


@pytest.mark.parametrize("new", [True, False])
def test_a_passphrase_with_no_terminal_names_the_archive_option(new, monkeypatch):
    """With no terminal to ask on, the hint names the option that sets the archive's
    passphrase, not ``--passphrase-env`` (the signing key's, or a deprecated spelling)."""
    from ftmanifest.backup.keys import passphrase_source
    from ftmanifest.errors import UsageError

    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(UsageError) as caught:
        passphrase_source(None, new=new)()
    assert caught.value.field == "--archive-passphrase-env"
    assert "--archive-passphrase-env VAR" in (caught.value.hint or "")
