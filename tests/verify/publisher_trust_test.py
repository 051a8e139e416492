"""The recorded publisher of a locked model (``model.publisher_signature``) judged
against the trust file as it is now, with real keys and a real trust file: trusted is
no row; removed, past its ``valid-before``, another key type or no trust file at all is
one ``drift.publisher-untrusted`` row naming the key, the trust file and the fix."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ftmanifest.cli import main
from ftmanifest.manifest.environment import PublisherSignature
from ftmanifest.signing.keys import fingerprint, load_private_key
from ftmanifest.verify.publisher import RULE, publisher_rows

PRINCIPAL = "pub@example.org"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    monkeypatch.chdir(root)
    monkeypatch.delenv("FTMANIFEST_TRUST_FILE", raising=False)
    (root / "exp.yaml").write_text("ftmanifest: 1\n")
    return root


def _key(tmp_path: Path, name: str, *kind: str) -> tuple[Path, str]:
    key = tmp_path / name
    assert main(["keygen", "-f", str(key), "--no-passphrase", "-q", *kind]) == 0
    return key, fingerprint(load_private_key(key).public_key())


def _record(key: str, method: str = "key") -> PublisherSignature:
    return PublisherSignature(file="model.sig", method=method, signer=PRINCIPAL, key=key)


def _trust_file(repo: Path) -> Path:
    return repo / ".ftmanifest" / "allowed_signers"


def test_control_a_trusted_publisher_gives_no_row_and_nothing_recorded_none(
    repo: Path, tmp_path: Path
) -> None:
    key, fp = _key(tmp_path, "pub", "--type", "ecdsa-p256")
    assert main(["trust", "add", f"{key}.pub.pem", "--principal", PRINCIPAL]) == 0
    assert publisher_rows(_record(fp), repo / "exp.yaml") == []
    assert publisher_rows(None, repo / "exp.yaml") == []


def test_a_publisher_key_taken_out_of_the_trust_file_is_a_row(repo: Path, tmp_path: Path) -> None:
    key, fp = _key(tmp_path, "pub", "--type", "ecdsa-p256")
    other, _ = _key(tmp_path, "other", "--type", "ecdsa-p256")
    assert main(["trust", "add", f"{other}.pub", "--principal", "other@example.org"]) == 0
    (row,) = publisher_rows(_record(fp), repo / "exp.yaml")
    assert row.rule == RULE and row.kind == "drift" and row.severity == "error"
    assert row.field == "model.publisher_signature.key"
    assert fp in row.observed and "no longer in" in row.observed
    assert "ftmanifest trust add" in row.hint and "model.sig" in row.message


def test_a_publisher_key_past_its_valid_before_is_a_row(repo: Path, tmp_path: Path) -> None:
    key, fp = _key(tmp_path, "pub", "--type", "ecdsa-p256")
    assert main(["trust", "add", f"{key}.pub.pem", "--principal", PRINCIPAL]) == 0
    trust = _trust_file(repo)
    trust.write_text(
        trust.read_text().replace(
            'namespaces="ftmanifest"', 'namespaces="ftmanifest",valid-before="20200101"'
        )
    )
    (row,) = publisher_rows(_record(fp), repo / "exp.yaml")
    assert "expired" in row.observed, row.observed


def test_no_trust_file_is_a_row_not_a_pass(repo: Path, tmp_path: Path) -> None:
    _, fp = _key(tmp_path, "pub", "--type", "ecdsa-p256")
    (row,) = publisher_rows(_record(fp), repo / "exp.yaml")
    assert row.rule == RULE and "trust file" in row.observed


def test_a_key_recorded_for_the_certificate_method_is_judged_as_a_ca(
    repo: Path, tmp_path: Path
) -> None:
    """The same fingerprint trusted as a signing key is not a trusted CA."""
    key, fp = _key(tmp_path, "pub", "--type", "ecdsa-p256")
    assert main(["trust", "add", f"{key}.pub.pem", "--principal", PRINCIPAL]) == 0
    (row,) = publisher_rows(_record(fp, "certificate"), repo / "exp.yaml")
    assert "CA" in row.message
