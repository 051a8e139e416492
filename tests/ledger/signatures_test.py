"""Signed records: ``$FTMANIFEST_LEDGER_KEY`` signs every record, ``ledger check
--trust`` verifies them, and a record rewritten without the key is refused.

Keys come from the real ``ftmanifest keygen``; the trust file is the
allowed-signers line it prints.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ftmanifest.ledger import Ledger
from ftmanifest.ledger.recordfile import KEY_ENV, sign_record
from ftmanifest.signing.keys import load_private_key
from tests.conftest import CLF
from tests.ledger.conftest import (
    KeyPair,
    body,
    check_json,
    fill,
    ledger_cli,
    rewrite,
    rules,
)


@pytest.fixture
def signed(folder: Path, keys: tuple[KeyPair, KeyPair], monkeypatch: pytest.MonkeyPatch) -> Ledger:
    """Two records planned through the CLI and two appended through the library,
    all signed by the key in ``$FTMANIFEST_LEDGER_KEY``."""
    mine, _ = keys
    for _ in range(2):
        out = ledger_cli(folder, "plan", str(CLF), env={KEY_ENV: str(mine.key)})
        assert out.returncode == 0, out.stdout + out.stderr
    monkeypatch.setenv(KEY_ENV, str(mine.key))
    store = Ledger(folder)
    fill(store, 2)
    monkeypatch.delenv(KEY_ENV)
    return store


def test_records_are_signed_and_verify(signed: Ledger, keys: tuple[KeyPair, KeyPair]) -> None:
    mine, stranger = keys
    entries = signed.read().entries
    assert len(entries) == 4 and all(e.signature is not None for e in entries)
    code, report = check_json(signed.root, "--trust", str(mine.trust), "--require-signed")
    assert (code, report["signed"], report["signatures_checked"]) == (0, 4, True), report
    text = ledger_cli(signed.root, "check", "--trust", str(mine.trust))
    assert text.returncode == 0 and "4 signed (checked)" in text.stdout
    code, report = check_json(signed.root, "--trust", str(stranger.trust))
    assert code == 1 and rules(report) == ["ledger.bad-signature"] * 4


def test_the_projects_trust_file_is_used(tmp_path: Path, keys: tuple[KeyPair, KeyPair]) -> None:
    """Run from the project, its ``.ftmanifest/allowed_signers`` (next to its
    ``.ftmanifest/ledger``) is the default trust; ``trust_source_test`` shows a
    file beside a ledger elsewhere is not."""
    mine, stranger = keys
    folder = tmp_path / ".ftmanifest" / "ledger"
    out = ledger_cli(folder, "plan", str(CLF), env={KEY_ENV: str(mine.key)})
    assert out.returncode == 0, out.stdout + out.stderr
    (folder.parent / "allowed_signers").write_text(stranger.trust.read_text())
    code, report = check_json(folder, cwd=tmp_path)
    assert (code, report["signatures_checked"], rules(report)) == (
        1,
        True,
        ["ledger.bad-signature"],
    )
    (folder.parent / "allowed_signers").write_text(mine.trust.read_text())
    assert check_json(folder, cwd=tmp_path)[0] == 0


def test_a_record_rewritten_keeping_its_old_signature(
    signed: Ledger, keys: tuple[KeyPair, KeyPair]
) -> None:
    mine, _ = keys
    newest = signed.read().entries[-1]
    rewrite(newest, note="did not happen")  # id and name recomputed: hash links hold
    assert check_json(signed.root)[0] == 0  # without trust only the links are judged
    code, report = check_json(signed.root, "--trust", str(mine.trust))
    assert code == 1 and rules(report) == ["ledger.bad-signature"]
    assert "another record" in report["problems"][0]["message"]


def test_a_record_rewritten_without_a_signature(
    signed: Ledger, keys: tuple[KeyPair, KeyPair]
) -> None:
    """Dropping the signature passes a check that does not require one: signing
    proves who wrote the signed records, ``--require-signed`` that all are."""
    mine, _ = keys
    rewrite(signed.read().entries[-1], signature=None, note="did not happen")
    assert check_json(signed.root, "--trust", str(mine.trust))[0] == 0
    code, report = check_json(signed.root, "--trust", str(mine.trust), "--require-signed")
    assert code == 1 and rules(report) == ["ledger.unsigned"]
    text = ledger_cli(signed.root, "check", "--require-signed")
    assert text.returncode == 1 and "ledger.unsigned" in text.stdout


def test_a_record_resigned_by_an_untrusted_key(
    signed: Ledger, keys: tuple[KeyPair, KeyPair]
) -> None:
    mine, stranger = keys
    newest = signed.read().entries[-1]
    record = dict(body(newest.file)["record"], note="did not happen")
    from ftmanifest.ledger.recordfile import record_id

    envelope = sign_record(record_id(record), load_private_key(stranger.key))
    rewrite(newest, signature=envelope, note="did not happen")
    code, report = check_json(signed.root, "--trust", str(mine.trust))
    assert code == 1 and rules(report) == ["ledger.bad-signature"]
    assert check_json(signed.root, "--trust", str(stranger.trust))[1]["problems"] != []


def test_a_signature_moved_onto_another_record(
    signed: Ledger, keys: tuple[KeyPair, KeyPair]
) -> None:
    """A valid envelope copied from one record to another (unsigned) one."""
    mine, _ = keys
    entries = signed.read().entries
    donor = body(entries[0].file)["signature"]
    rewrite(entries[-1], signature=donor)
    code, report = check_json(signed.root, "--trust", str(mine.trust))
    assert code == 1 and rules(report) == ["ledger.bad-signature"]


def test_a_garbled_signature_is_a_problem_not_a_crash(
    signed: Ledger, keys: tuple[KeyPair, KeyPair]
) -> None:
    mine, _ = keys
    newest = signed.read().entries[-1]
    data = body(newest.file)
    data["signature"] = {"payload": "!!", "payloadType": 3, "signatures": [{"sig": None}]}
    newest.file.write_text(json.dumps(data))
    code, report = check_json(signed.root, "--trust", str(mine.trust))
    assert code == 1 and rules(report) == ["ledger.bad-signature"]


@pytest.mark.parametrize("kind", ["missing", "garbage"])
def test_an_unusable_signing_key_is_named_and_nothing_is_written(
    folder: Path, tmp_path: Path, kind: str
) -> None:
    """A key that cannot be loaded is the key's fault, not "cannot write to the
    ledger" (a missing key used to read as a write failure, which ``run``
    only warns about, leaving the attempt unrecorded)."""
    key = tmp_path / "no-such-key"
    if kind == "garbage":
        key.write_text("not a key\n")
        key.chmod(0o600)
    out = ledger_cli(folder, "plan", str(CLF), env={KEY_ENV: str(key)})
    assert out.returncode == 2, out.stdout + out.stderr
    assert str(key) in out.stderr and "cannot write to the ledger" not in out.stderr
    if kind == "missing":
        assert KEY_ENV in out.stderr
    assert not folder.exists() or os.listdir(folder) == []
