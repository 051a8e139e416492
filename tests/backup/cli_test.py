"""``ftmanifest backup`` through the command line: recipients from the manifest,
experiment facts in the metadata, and the options that do not go together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftmanifest.cli import main

from .conftest import Keys


def _manifest(tmp_path: Path, recipient: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(
        "ftmanifest: 1\nexperiment: {id: exp-cli}\nmodel: {path: model}\n"
        "data:\n  - {name: train, role: train, path: train.jsonl, license: test}\n"
        f"security:\n  backup_recipients: [{recipient}]\n"
    )
    return path


def _sign(path: Path, keys: Keys) -> None:
    from ftmanifest.manifest import load_manifest
    from ftmanifest.signing.sign import sign_manifest

    sign_manifest(path, load_manifest(path).canonical(), keys.signing)


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "log.txt").write_text("loss 0.5\n")
    return run


def test_recipients_come_from_a_signed_manifest(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _manifest(tmp_path, keys.recipient.text)
    _sign(manifest, keys)
    argv = ["backup", "create", str(_run(tmp_path)), "--to", str(tmp_path / "b"), "--key",
            str(keys.signing_path), "--manifest", str(manifest), "--trust",
            str(keys.trust_path), "--tag", "nightly", "--format", "json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    p = doc["predicate"]
    assert p["experiment_id"] == "exp-cli" and p["manifest_digest"].startswith("sha256:")
    assert p["tags"] == ["nightly"]
    assert [r["key"] for r in p["recipients"]] == [keys.recipient.text]
    restored = tmp_path / "restored"
    assert main(["restore", doc["archive"], "-i", str(keys.identity_path), "--to",
                 str(restored), "--trust", str(keys.trust_path)]) == 0  # fmt: skip
    assert (restored / "run" / "log.txt").read_text() == "loss 0.5\n"


def test_an_unsigned_manifest_cannot_choose_the_recipients(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited manifest could name an outsider's key: refused, nothing written."""
    manifest = _manifest(tmp_path, keys.recipient.text)
    argv = ["backup", "create", str(_run(tmp_path)), "--to", str(tmp_path / "b"), "--key",
            str(keys.signing_path), "--manifest", str(manifest), "--trust",
            str(keys.trust_path)]  # fmt: skip
    assert main(argv) == 1
    assert not (tmp_path / "b").exists()
    _sign(manifest, keys)
    manifest.write_text(manifest.read_text().replace("exp-cli", "exp-cli-2"))
    assert main(argv) == 1  # changed after signing
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    "extra",
    [
        ["--read-data"],
        ["-i", "id.txt"],
        ["--passphrase-env", "PW"],  # together with -r
    ],
)
def test_options_that_do_not_go_with_a_backup(
    keys: Keys, tmp_path: Path, extra: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PW", "secret")
    argv = ["backup", "create", str(_run(tmp_path)), "--to", str(tmp_path / "b"), "--key",
            str(keys.signing_path), "-r", keys.recipient.text, *extra]  # fmt: skip
    try:
        code = main(argv)
    except SystemExit as exc:  # an option only `backup check` takes: argparse refuses it
        code = int(exc.code or 0)
    assert code == 2
    assert not (tmp_path / "b").exists()


def test_a_swapped_passphrase_key_file_is_refused_before_it_is_opened(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from .conftest import backup

    run = _run(tmp_path)
    one = backup(keys, [run], tmp_path / "b", passphrase="pw")
    two = backup(keys, [run], tmp_path / "other", passphrase="pw")
    assert one.key_path is not None and two.key_path is not None
    one.key_path.write_bytes(two.key_path.read_bytes())  # same passphrase, another key
    monkeypatch.setenv("PW", "pw")
    argv = ["restore", str(one.archive), "--passphrase-env", "PW", "--to",
            str(tmp_path / "dest"), "--trust", str(keys.trust_path)]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "key file is not the one" in err and "metadata-mismatch" in err
    assert not (tmp_path / "dest").exists()


def test_an_unusable_trust_file_is_one_input_error_not_a_row_per_backup(
    keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    from .conftest import backup

    backup(keys, [_run(tmp_path)], tmp_path / "b")
    fifo = tmp_path / "trust.fifo"
    os.mkfifo(fifo)
    assert main(["backup", "check", str(tmp_path / "b"), "--trust", str(fifo)]) == 2
    assert main(["prune", str(tmp_path / "b"), "--keep-last", "1", "--trust", str(fifo)]) == 2
    capsys.readouterr()
