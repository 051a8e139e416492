"""``lock`` pins a certificate-signed model: model.sig made by the real
``model_signing sign certificate`` CLI is verified by model-signing's own
certificate verifier against a CA the trust file trusts (``trust add CA.pem``),
never against the CA the bundle carries; certificates are made here with
``cryptography``."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ftmanifest.cli import main
from ftmanifest.manifest import load_manifest
from tests.verify.publisher_signature_test import project

__all__ = ["project"]  # the key-method tests' project: a git repo with a two-file model

pytest.importorskip("model_signing")
MODEL_SIGNING = str(Path(sys.executable).with_name("model_signing"))
NOW = datetime.datetime.now(datetime.timezone.utc)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool,
    code_signing: bool = True,
) -> x509.Certificate:
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - datetime.timedelta(days=1))
        .not_valid_after(NOW + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.RFC822Name(subject)]), critical=False
        )
        oid = ExtendedKeyUsageOID
        usage = [oid.CODE_SIGNING if code_signing else oid.EMAIL_PROTECTION]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


class Publisher:
    """A CA (ca.pem) and a leaf it issued (leaf.pem, leaf.key), in ``folder``."""

    def __init__(self, folder: Path, ca_name: str = "Example Models CA", **leaf: bool) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca_cert = _cert(ca_name, ca_key, None, ca=True)
        self.ca = _pem(folder / "ca.pem", self.ca_cert)
        leaf_key = ec.generate_private_key(ec.SECP256R1())
        self.leaf = _pem(
            folder / "leaf.pem",
            _cert("models@example.org", leaf_key, (ca_name, ca_key), ca=False, **leaf),
        )
        self.key = folder / "leaf.key"
        self.key.write_bytes(
            leaf_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )

    def sign(self, model: Path) -> None:
        done = subprocess.run(
            [MODEL_SIGNING, "sign", "certificate", str(model), "--private_key", str(self.key),
             "--signing_certificate", str(self.leaf), "--certificate_chain", str(self.ca),
             "--signature", str(model / "model.sig")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr


def _lock(capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["lock", "exp.yaml"])
    return code, capsys.readouterr().err


def _trust_ca(publisher: Publisher, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["trust", "add", str(publisher.ca), "--principal", "models@example.org"])
    assert code == 0, capsys.readouterr().err


def test_lock_records_a_certificate_signer_its_ca_trusted(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publisher = Publisher(tmp_path / "pub")
    publisher.sign(project / "model")
    before = (project / "exp.yaml").read_text()
    # the bundle carries its CA, and that is not trust: refused, nothing written
    code, err = _lock(capsys)
    assert code == 1 and "model-signature-untrusted" in err and "Traceback" not in err
    assert (project / "exp.yaml").read_text() == before
    _trust_ca(publisher, capsys)
    code, err = _lock(capsys)
    assert code == 0, err
    record = load_manifest(project / "exp.yaml").manifest.model.publisher_signature
    assert record is not None and record.method == "certificate"
    assert record.signer == "models@example.org" and record.key.startswith("SHA256:")
    assert record.certificate is not None and "CN=models@example.org" in record.certificate
    assert "SAN models@example.org" in record.certificate
    assert record.authority == "sha256:" + publisher.ca_cert.fingerprint(hashes.SHA256()).hex()
    capsys.readouterr()
    assert main(["verify", "exp.yaml", "--no-signature"]) == 0


def test_a_chain_to_another_ca_of_the_same_name_is_untrusted(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _trust_ca(Publisher(tmp_path / "pub"), capsys)
    Publisher(tmp_path / "intruder").sign(project / "model")  # same CA subject, other key
    code, err = _lock(capsys)
    assert code == 1 and "model-signature-untrusted" in err and "Traceback" not in err
    assert "models@example.org" in err


def test_a_leaf_without_a_signing_usage_is_untrusted(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publisher = Publisher(tmp_path / "pub", code_signing=False)
    _trust_ca(publisher, capsys)
    publisher.sign(project / "model")
    code, err = _lock(capsys)
    assert code == 1 and "model-signature-untrusted" in err and "cannot be used for" in err


def test_lock_refuses_files_changed_after_certificate_signing(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publisher = Publisher(tmp_path / "pub")
    _trust_ca(publisher, capsys)
    publisher.sign(project / "model")
    weights = project / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[7] ^= 1
    weights.write_bytes(bytes(data))
    code, err = _lock(capsys)
    assert code == 1 and "model-signature-mismatch" in err and "model.safetensors" in err


def _chain_garbage(doc: dict) -> None:
    doc["verificationMaterial"]["x509CertificateChain"]["certificates"][0]["rawBytes"] = (
        base64.b64encode(b"not a certificate").decode()
    )


def _no_certificates(doc: dict) -> None:
    doc["verificationMaterial"]["x509CertificateChain"] = {"certificates": []}


@pytest.mark.parametrize("damage", [_chain_garbage, _no_certificates])
def test_a_garbage_certificate_chain_is_malformed(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage
) -> None:
    publisher = Publisher(tmp_path / "pub")
    _trust_ca(publisher, capsys)
    publisher.sign(project / "model")
    sig = project / "model" / "model.sig"
    doc = json.loads(sig.read_text())
    damage(doc)
    sig.write_text(json.dumps(doc))
    code, err = _lock(capsys)
    assert code == 1 and "model-signature-malformed" in err and "Traceback" not in err


def test_an_altered_certificate_signature_is_a_mismatch(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publisher = Publisher(tmp_path / "pub")
    _trust_ca(publisher, capsys)
    publisher.sign(project / "model")
    sig = project / "model" / "model.sig"
    doc = json.loads(sig.read_text())
    raw = bytearray(base64.b64decode(doc["dsseEnvelope"]["signatures"][0]["sig"]))
    raw[-1] ^= 1
    doc["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()
    sig.write_text(json.dumps(doc))
    code, err = _lock(capsys)
    assert code == 1 and "model-signature-mismatch" in err


def test_trust_add_refuses_a_leaf_and_a_non_certificate(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publisher = Publisher(tmp_path / "pub")
    capsys.readouterr()
    assert main(["trust", "add", str(publisher.leaf), "--principal", "a@example.org"]) == 2
    err = capsys.readouterr().err
    assert "not a certificate authority" in err and "CA:TRUE" in err
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")
    assert main(["trust", "add", str(junk), "--principal", "a@example.org"]) == 2
    assert "not a readable PEM certificate" in capsys.readouterr().err
    assert not (project / ".ftmanifest" / "allowed_signers").exists()


def test_a_swapped_ca_file_is_refused_not_used(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publisher, intruder = Publisher(tmp_path / "pub"), Publisher(tmp_path / "intruder")
    _trust_ca(publisher, capsys)
    (stored,) = (project / ".ftmanifest" / "x509-ca").iterdir()
    stored.write_bytes(intruder.ca.read_bytes())
    intruder.sign(project / "model")
    code, err = _lock(capsys)
    assert code == 2 and "is not the key of trust file line 1" in err


def test_the_trust_file_stays_valid_for_ssh_keygen_and_keys_still_work(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _trust_ca(Publisher(tmp_path / "pub"), capsys)
    # control: the key method beside a CA line; ssh-keygen reads the CA line first
    key = tmp_path / "publisher"
    assert main(["keygen", "-f", str(key), "--type", "ecdsa-p256", "--no-passphrase"]) == 0
    assert main(["trust", "add", f"{key}.pub.pem", "--principal", "pub@example.org"]) == 0
    trust = project / ".ftmanifest" / "allowed_signers"
    assert 'cert-authority,namespaces="x509-ca@ftmanifest"' in trust.read_text().splitlines()[0]
    message = tmp_path / "m.txt"
    message.write_text("hello\n")
    subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n", "ftmanifest", str(message)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    with message.open("rb") as stdin:
        done = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", str(trust), "-I", "pub@example.org",
             "-n", "ftmanifest", "-s", f"{message}.sig"],
            stdin=stdin, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [MODEL_SIGNING, "sign", "key", "model", "--private_key", str(key),
         "--signature", "model/model.sig"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    code, err = _lock(capsys)
    assert code == 0, err
    record = load_manifest(project / "exp.yaml").manifest.model.publisher_signature
    assert record is not None and record.method == "key" and record.signer == "pub@example.org"
    assert record.certificate is None


def test_verify_refuses_once_the_ca_is_no_longer_trusted(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publisher = Publisher(tmp_path / "pub")
    publisher.sign(project / "model")
    _trust_ca(publisher, capsys)
    code, err = _lock(capsys)
    assert code == 0, err
    capsys.readouterr()
    assert main(["verify", "exp.yaml", "--no-signature"]) == 0  # control
    trust = project / ".ftmanifest" / "allowed_signers"
    lines = trust.read_text().splitlines()
    kept = [line for line in lines if "cert-authority" not in line]
    assert len(kept) == len(lines) - 1
    trust.write_text("".join(f"{line}\n" for line in kept))
    capsys.readouterr()
    assert main(["verify", "exp.yaml", "--no-signature"]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "model.publisher_signature.key" in text and "model.sig" in text, text
    assert "no longer in" in text and "trust add CA.pem" in text, text
    assert "Traceback" not in text
