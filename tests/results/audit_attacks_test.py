"""``audit`` said OK on run folders that are not OK.

Each case starts from the clean, complete tiny run (``audit_run``), hides a
made-up token, or a loose key or log, where audit used not to look, and shows
the real reader gets at what was hidden (tar, numpy) before asking audit.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from ftmanifest.results.audit import audit
from tests.results.conftest import GHP, AuditRun


def _errors(r: AuditRun) -> list[tuple[str, str]]:
    report = audit(r.run, r.manifest, signature=False)
    return [(f.rule, f.path or "") for f in report.findings if f.severity == "error"]


def _pem() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def test_the_clean_run_has_no_error(audit_run: AuditRun) -> None:
    assert _errors(audit_run) == []  # every case below differs from this one only as it says


def test_a_token_in_a_plain_tar_of_logs(audit_run: AuditRun) -> None:
    r = audit_run
    body = f"step 9 pushed with {GHP}\n".encode()
    with tarfile.open(r.run / "logs" / "old-logs.tar", "w") as tar:
        info = tarfile.TarInfo("logs/train-0.log")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    with tarfile.open(r.run / "logs" / "old-logs.tar") as tar:
        member = tar.extractfile("logs/train-0.log")
        assert member is not None and GHP.encode() in member.read()
    (r.run / "logs" / "old-logs.tar").chmod(0o640)
    assert ("secret.github-pat", str(r.run / "logs" / "old-logs.tar")) in _errors(r)


@pytest.mark.parametrize("dtype", ["<U64", "|S64", ">U64"])
def test_a_token_in_a_numpy_string_array(audit_run: AuditRun, dtype: str) -> None:
    np = pytest.importorskip("numpy")
    r = audit_run
    path = r.run / "checkpoints" / "step-2" / "labels.npy"
    np.save(path, np.array(["billing", f"key {GHP}"], dtype=dtype))
    assert GHP in str(np.load(path, allow_pickle=False)[1])  # no pickle needed to read it
    path.chmod(0o640)
    assert ("secret.github-pat", str(path)) in _errors(r)


def test_a_token_in_a_file_name(audit_run: AuditRun) -> None:
    r = audit_run
    path = r.run / "logs" / f"push-{GHP}.log"
    path.write_text("step 1 loss 0.5\n")
    path.chmod(0o640)
    assert ("secret.github-pat", str(path)) in _errors(r)


def test_a_token_in_utf16_after_16k_of_ascii(audit_run: AuditRun) -> None:
    r = audit_run
    path = r.run / "logs" / "mixed.log"
    path.write_bytes(b"step 1 loss 0.5\n" * 1100 + f"pushed {GHP}\n".encode("utf-16-le"))
    path.chmod(0o640)
    assert any(rule.startswith(("secret.", "scan.")) for rule, p in _errors(r) if p == str(path))


def test_a_token_in_keys_notes_is_found_and_the_key_itself_is_not_a_finding(
    audit_run: AuditRun,
) -> None:
    r = audit_run
    keys = r.run / "keys"
    keys.mkdir(mode=0o700)
    (keys / "id_ed25519").write_bytes(_pem())
    (keys / "id_ed25519").chmod(0o600)
    assert _errors(r) == []  # a private key is what keys/ is for
    (keys / "notes.txt").write_text(f"the CI token is {GHP}\n")
    (keys / "notes.txt").chmod(0o600)
    assert _errors(r) == [("secret.github-pat", str(keys / "notes.txt"))]


def test_a_private_key_outside_keys_is_still_a_finding(audit_run: AuditRun) -> None:
    r = audit_run
    path = r.run / "logs" / "id_ed25519"
    path.write_bytes(_pem())
    path.chmod(0o600)
    assert ("secret.private-key", str(path)) in _errors(r)


@pytest.mark.parametrize("klass", ["keys", "logs", "checkpoints"])
def test_a_class_folder_linked_outside_is_judged_where_it_points(
    audit_run: AuditRun, tmp_path: Path, klass: str
) -> None:
    r = audit_run
    outside = tmp_path / f"elsewhere-{klass}"
    outside.mkdir(mode=0o750)
    loose = outside / ("id_ed25519" if klass == "keys" else "train.log")
    loose.write_bytes(_pem() if klass == "keys" else b"step 1 loss 0.5\n")
    loose.chmod(0o644 if klass == "keys" else 0o666)
    if (r.run / klass).exists():
        os.rename(r.run / klass, tmp_path / f"moved-{klass}")
    (r.run / klass).symlink_to(outside)
    errors = _errors(r)
    assert ("audit.permissions", str(loose)) in errors, errors


def test_a_linked_key_file_is_judged_where_it_points(audit_run: AuditRun, tmp_path: Path) -> None:
    r = audit_run
    target = tmp_path / "shared-key"
    target.write_bytes(_pem())
    target.chmod(0o644)
    keys = r.run / "keys"
    keys.mkdir(mode=0o700)
    (keys / "id_ed25519").symlink_to(target)
    assert ("audit.permissions", str(target)) in _errors(r)


def test_fix_perms_tightens_the_target_of_a_link_inside_the_run(audit_run: AuditRun) -> None:
    r = audit_run
    real = r.run / "logs" / "train.log"
    real.chmod(0o666)
    (r.run / "logs" / "latest.log").symlink_to("train.log")
    report = audit(r.run, r.manifest, signature=False, fix_perms=True)
    assert oct(real.stat().st_mode & 0o777) == "0o640"
    assert [c.path for c in report.subject.changes] == [real]  # once, though two names reach it
