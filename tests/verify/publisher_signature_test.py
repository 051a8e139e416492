"""``lock`` pins a publisher-signed model: model.sig (made by the real
``model_signing`` CLI) is verified by model-signing against the trust file,
the signer is recorded, and a replaced model.sig is drift for ``verify``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ftmanifest.cli import main
from ftmanifest.manifest import load_manifest

pytest.importorskip("model_signing")
MODEL_SIGNING = str(Path(sys.executable).with_name("model_signing"))


def _keys(folder: Path, name: str) -> Path:
    key = folder / name
    assert main(["keygen", "-f", str(key), "--type", "ecdsa-p256", "--no-passphrase"]) == 0
    return key


def _publisher_sign(model: Path, key: Path) -> None:
    done = subprocess.run(
        [MODEL_SIGNING, "sign", "key", str(model), "--private_key", str(key),
         "--signature", str(model / "model.sig")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "p"
    (root / "model").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    (root / "model" / "config.json").write_text('{"model_type": "tiny"}\n')
    (root / "model" / "model.safetensors").write_bytes(bytes(range(256)) * 4)
    (root / "exp.yaml").write_text("ftmanifest: 1\nexperiment:\n  id: x\nmodel:\n  path: model\n")
    monkeypatch.chdir(root)
    monkeypatch.delenv("FTMANIFEST_TRUST_FILE", raising=False)
    return root


def _lock(project: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["lock", str(project / "exp.yaml")])
    return code, capsys.readouterr().err


def test_lock_records_a_trusted_publisher_and_verify_refuses_a_replaced_sig(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publisher = _keys(tmp_path, "publisher")
    _publisher_sign(project / "model", publisher)
    before = (project / "exp.yaml").read_text()
    # not trusted yet: refused, named, nothing written
    code, err = _lock(project, capsys)
    assert code == 1 and "model-signature-untrusted" in err and "model.sig" in err
    assert "ftmanifest trust add PUB.pem" in err and "Traceback" not in err
    assert (project / "exp.yaml").read_text() == before
    # the publisher's PEM public key trusted: locked, signer recorded
    assert main(["trust", "add", f"{publisher}.pub.pem", "--principal", "pub@example.org"]) == 0
    code, err = _lock(project, capsys)
    assert code == 0, err
    model = load_manifest(project / "exp.yaml").manifest.model
    assert model.publisher_signature is not None
    assert model.publisher_signature.signer == "pub@example.org"
    assert model.publisher_signature.key.startswith("SHA256:")
    assert "model.sig" in {f.path for f in model.files}
    capsys.readouterr()
    assert main(["verify", "exp.yaml", "--no-signature"]) == 0  # control
    # model.sig replaced by another (valid) signature of the same files: drift
    _publisher_sign(project / "model", _keys(tmp_path, "intruder"))
    capsys.readouterr()
    assert main(["verify", "exp.yaml", "--no-signature"]) == 1
    assert "model.sig" in capsys.readouterr().out
    # ... and lock refuses to re-pin it: its key is not trusted
    code, err = _lock(project, capsys)
    assert code == 1 and "model-signature-untrusted" in err


def test_lock_refuses_files_changed_after_signing(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publisher = _keys(tmp_path, "publisher")
    _publisher_sign(project / "model", publisher)
    assert main(["trust", "add", f"{publisher}.pub", "--principal", "pub@example.org"]) == 0
    weights = project / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100] ^= 1
    weights.write_bytes(bytes(data))
    code, err = _lock(project, capsys)
    assert code == 1 and "model-signature-mismatch" in err
    assert "model.safetensors" in err and "model.sig" in err


@pytest.mark.parametrize(
    "damage",
    [lambda b: b[: len(b) // 2], lambda b: b"garbage\x00\xff", lambda b: b"{}", lambda b: b""],
    ids=["truncated", "garbage", "empty-object", "empty-file"],
)
def test_a_broken_bundle_is_a_clean_refusal(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage
) -> None:
    publisher = _keys(tmp_path, "publisher")
    _publisher_sign(project / "model", publisher)
    assert main(["trust", "add", f"{publisher}.pub", "--principal", "pub@example.org"]) == 0
    sig = project / "model" / "model.sig"
    sig.write_bytes(damage(sig.read_bytes()))
    code, err = _lock(project, capsys)
    assert code == 1, err
    assert "model-signature-malformed" in err and "model.sig" in err and "Traceback" not in err


def test_a_bundle_whose_signature_was_altered_is_refused(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import base64
    import json

    publisher = _keys(tmp_path, "publisher")
    _publisher_sign(project / "model", publisher)
    assert main(["trust", "add", f"{publisher}.pub", "--principal", "pub@example.org"]) == 0
    sig = project / "model" / "model.sig"
    doc = json.loads(sig.read_text())
    raw = bytearray(base64.b64decode(doc["dsseEnvelope"]["signatures"][0]["sig"]))
    raw[-1] ^= 1
    doc["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()
    sig.write_text(json.dumps(doc))
    code, err = _lock(project, capsys)
    assert code == 1 and "model-signature-mismatch" in err and "Traceback" not in err


def test_without_model_signing_lock_names_the_extra(project: Path, tmp_path: Path) -> None:
    publisher = _keys(tmp_path, "publisher")
    _publisher_sign(project / "model", publisher)
    assert main(["trust", "add", f"{publisher}.pub", "--principal", "pub@example.org"]) == 0
    code = (
        "import sys; sys.modules['model_signing'] = None\n"
        "from ftmanifest.cli import main\n"
        "sys.exit(main(['lock', 'exp.yaml']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=project
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'ftmanifest[interop]'" in done.stderr and "Traceback" not in done.stderr


def test_a_mismatch_names_each_file_and_shows_no_raw_digest(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """model-signing's own reason is a list's repr with raw digest bytes: the refusal
    names what changed, what was added and what is gone, in words."""
    publisher = _keys(tmp_path, "publisher")
    (project / "model" / "notes.txt").write_text("signed, then removed\n")
    _publisher_sign(project / "model", publisher)
    assert main(["trust", "add", f"{publisher}.pub", "--principal", "pub@example.org"]) == 0
    code, err = _lock(project, capsys)
    assert code == 0, err  # control: as signed, it locks
    (project / "model" / "config.json").write_text('{"model_type": "other"}\n')
    (project / "model" / "extra.bin").write_bytes(b"\x00")
    (project / "model" / "notes.txt").unlink()
    code, err = _lock(project, capsys)
    assert code == 1 and "model-signature-mismatch" in err
    assert "changed: config.json" in err and "not signed: extra.bin" in err, err
    assert "missing: notes.txt" in err, err
    assert "digest_value" not in err and "\\x" not in err, err
    assert err.count("Signature mismatch") <= 2, err  # the message and observed, once each
