"""OpenSSF model-signing bundles (``model.sig``): write one, check one against the trust file.

Layer: signing (edge: reads and writes a model folder's files).  The work is
model-signing's own (``model_signing.signing`` / ``model_signing.verifying``,
the ``interop`` extra), imported only inside these functions; a missing
package is ``MissingExtraError`` (exit 2) naming ``pip install
'ftmanifest[interop]'``.  What ftmanifest adds is the trust decision: the
bundle's key must be an ECDSA key of the trust file (matched by the
``publicKey.hint`` model-signing writes, the sha256 of its PEM), valid now for
the ``ftmanifest`` namespace.  Hashing settings are model-signing's, taken
from the signed ``serialization`` block, so a bundle made by
``model_signing sign key`` with any of its options is checked as it was made.
A certificate-signed bundle (``model_signing sign certificate``) is checked
by model-signing's own certificate verifier with one trusted X.509 CA at a
time (``x509_ca``: a ``cert-authority`` line of the trust file and its
certificate), never with the CA certificates the bundle carries nor the
system's roots; the chain check is OpenSSL's, at the signing certificate's
not-before time, as model-signing does it.  A Sigstore bundle is refused as
not checkable offline here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from ftmanifest.errors import RefusedError
from ftmanifest.extras import require
from ftmanifest.signing._files import ENVELOPE_MAX_BYTES, KEY_MAX_BYTES
from ftmanifest.signing.errors import TrustFileNotFoundError
from ftmanifest.signing.judge import now_or
from ftmanifest.signing.keys import ECDSA_KEY_TYPE, PrivateKey, public_key_pem
from ftmanifest.signing.locate import choose_trust_file
from ftmanifest.signing.trust import (
    STATUS_OK,
    X509_CA_NAMESPACE,
    TrustedKey,
    TrustStore,
    load_trust,
)
from ftmanifest.signing.x509_ca import (
    TrustedAuthority,
    bundle_certificates,
    issued_by,
    load_authority,
    signer_identity,
)
from ftmanifest.untrusted import read_untrusted

SIGNATURE_NAME = "model.sig"
FEATURE = "OpenSSF model-signing (model.sig)"


class ModelSignatureError(RefusedError):
    """A model folder's ``model.sig`` does not vouch for it (exit 1)."""

    reason = "model-signature-refused"


class ModelSignatureMalformedError(ModelSignatureError):
    """``model.sig`` is not a model-signing bundle (truncated, not JSON, wrong shape)."""

    reason = "model-signature-malformed"


class ModelSignatureUntrustedError(ModelSignatureError):
    """``model.sig``'s key is not an ECDSA key the trust file trusts now."""

    reason = "model-signature-untrusted"


class ModelSignatureMismatchError(ModelSignatureError):
    """``model.sig`` does not verify, or the files are not those it signed."""

    reason = "model-signature-mismatch"


@dataclass(frozen=True)
class ModelSigner:
    """Who signed a verified ``model.sig``: the trust file's principals and key."""

    principals: tuple[str, ...]
    fingerprint: str
    """The trusted key's OpenSSH fingerprint (for a certificate: the CA's key)."""
    trust_line: int
    method: str = "key"
    """model-signing's method: ``key`` or ``certificate``."""
    certificate: str = ""
    """For ``certificate``: the signing certificate's subject and SANs."""
    authority: str = ""
    """For ``certificate``: the trusted CA certificate's ``sha256:`` fingerprint."""


def write_model_signature(
    folder: Path, key_path: Path, password: bytes | None, *, ignore: tuple[str, ...] = ()
) -> Path:
    """Sign ``folder`` with model-signing's key method into ``folder/model.sig``.

    ``key_path``: a PEM EC private key (model-signing reads PEM only);
    ``ignore``: names in the folder left out of the signed files besides
    ``model.sig`` (recorded in the bundle's ``serialization`` block, so
    ``model_signing verify`` leaves them out too).  Written beside, then renamed.
    """
    require("model_signing", FEATURE)
    from model_signing import hashing as ms_hashing
    from model_signing import signing as ms_signing

    target = folder / SIGNATURE_NAME
    # model-signing joins ignored paths to the model folder: they are names inside
    # it (a path with the folder in it again ignored nothing when the folder was
    # given relative, and the envelope bind rewrites next was signed in its old form)
    hashing = ms_hashing.Config().set_ignored_paths(
        paths=[SIGNATURE_NAME, *ignore], ignore_git_paths=True
    )
    # model-signing annotates the password as str but hands it to cryptography,
    # which takes bytes
    config = ms_signing.Config().use_elliptic_key_signer(
        private_key=key_path, password=cast("str | None", password)
    )
    fd, tmp = tempfile.mkstemp(prefix=".model.sig.", dir=folder.parent)
    os.close(fd)
    try:
        config.set_hashing_config(hashing).sign(folder, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _bundle(folder: Path) -> tuple[Path, dict[str, Any]]:
    path = folder / SIGNATURE_NAME
    data = read_untrusted(
        path,
        limit=ENVELOPE_MAX_BYTES,
        what="model-signing bundle",
        hint="ask the publisher for the model.sig that `model_signing sign` wrote",
    )
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _malformed(path, f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("dsseEnvelope"), dict):
        raise _malformed(path, "no dsseEnvelope object")
    material = doc.get("verificationMaterial")
    if not isinstance(material, dict):
        raise _malformed(path, "no verificationMaterial object")
    return path, doc


def _malformed(path: Path, what: str) -> ModelSignatureMalformedError:
    return ModelSignatureMalformedError(
        f"{SIGNATURE_NAME} is not a model-signing bundle: {what}",
        path=str(path),
        field=SIGNATURE_NAME,
        expected="a Sigstore bundle written by `model_signing sign key` (JSON)",
        observed=what,
        hint=f"do not trust this model; ask the publisher for its {SIGNATURE_NAME} again, "
        f"or remove {SIGNATURE_NAME} if the model is not meant to be publisher-signed",
    )


def _pem_hint(key: TrustedKey) -> str:
    return hashlib.sha256(public_key_pem(key.public_key())).hexdigest()


def _candidates(
    path: Path, doc: dict[str, Any], trust: TrustStore, now: datetime
) -> list[TrustedKey]:
    material = doc["verificationMaterial"]
    if "publicKey" not in material and "x509CertificateChain" not in material:
        method = next((k for k in material if k != "tlogEntries"), "none")
        raise ModelSignatureUntrustedError(
            f"{SIGNATURE_NAME} is signed by the {method} method; lock checks key- and "
            "certificate-signed bundles only (a Sigstore signature is not checked offline here)",
            path=str(path),
            field="verificationMaterial",
            expected="publicKey or x509CertificateChain (model_signing sign key|certificate)",
            observed=method,
            hint="ask the publisher for a key- or certificate-signed model.sig, "
            "or check this one with `model_signing verify` and remove it before lock",
        )
    hint = material["publicKey"].get("hint") if isinstance(material["publicKey"], dict) else None
    usable = [k for k in trust.keys if k.keytype == ECDSA_KEY_TYPE and k.status(now) == STATUS_OK]
    chosen = [k for k in usable if not hint or _pem_hint(k) == hint]
    if not chosen:
        raise ModelSignatureUntrustedError(
            f"{SIGNATURE_NAME} is signed by a key the trust file does not trust",
            path=str(path),
            field="verificationMaterial.publicKey.hint",
            expected=f"an ecdsa-sha2-nistp256 key trusted for ftmanifest in {trust.path}",
            observed=f"key hint {hint or '(none)'}; {len(usable)} trusted ECDSA key(s), none match",
            hint="if you trust this publisher, add their PEM public key: "
            "ftmanifest trust add PUB.pem --principal NAME",
        )
    return chosen


def verify_model_signature(folder: Path, trust: TrustStore, now: datetime) -> ModelSigner:
    """Verify ``folder/model.sig`` with model-signing against the trusted keys."""
    path, doc = _bundle(folder)
    if "x509CertificateChain" in doc["verificationMaterial"]:
        return _verify_certificate_bundle(folder, path, doc, trust, now)
    keys = _candidates(path, doc, trust, now)
    require("model_signing", FEATURE)
    from model_signing import verifying as ms_verifying

    failure = "no key tried"
    with tempfile.TemporaryDirectory(prefix="ftmanifest-pub-") as scratch:
        for key in keys:
            pem = Path(scratch) / f"key{key.line}.pem"
            pem.write_bytes(public_key_pem(key.public_key()))
            try:
                ms_verifying.Config().use_elliptic_key_verifier(public_key=pem).verify(folder, path)
            except Exception as exc:  # model-signing raises ValueError and others
                failure = _why(exc)
                continue
            return ModelSigner(key.principals, key.fingerprint, key.line)
    raise _mismatch(folder, path, failure)


def _authorities(
    path: Path, chain: list[x509.Certificate], trust: TrustStore, now: datetime
) -> list[TrustedAuthority]:
    """The trusted CAs, valid now, that may anchor the bundle's chain."""
    usable = [a for a in trust.authorities if a.status(now, X509_CA_NAMESPACE) == STATUS_OK]
    chosen = [c for c in (load_authority(a, trust.path) for a in usable) if issued_by(c, chain)]
    if not chosen:
        raise ModelSignatureUntrustedError(
            f"{SIGNATURE_NAME} is signed by a certificate no CA of the trust file issued",
            path=str(path),
            field="verificationMaterial.x509CertificateChain",
            expected=f"a chain to a CA certificate trusted in {trust.path}",
            observed=f"signer {signer_identity(chain[0])}, issued by "
            f"{chain[-1].issuer.rfc4514_string()[:120]}; "
            f"{len(usable)} trusted CA(s), none issued it",
            hint="if you trust this publisher's CA, add its certificate: "
            "ftmanifest trust add CA.pem --principal NAME",
        )
    return chosen


def _verify_certificate_bundle(
    folder: Path, path: Path, doc: dict[str, Any], trust: TrustStore, now: datetime
) -> ModelSigner:
    """model-signing's certificate verifier with each trusted CA that may anchor the chain."""
    try:
        chain = bundle_certificates(doc["verificationMaterial"])
    except ValueError as exc:
        raise _malformed(path, f"x509CertificateChain: {exc}") from None
    authorities = _authorities(path, chain, trust, now)
    require("model_signing", FEATURE)
    from model_signing import verifying as ms_verifying

    untrusted, failure = "", ""
    with tempfile.TemporaryDirectory(prefix="ftmanifest-ca-") as scratch:
        for ca in authorities:
            pem = Path(scratch) / f"ca{ca.entry.line}.pem"
            pem.write_bytes(ca.pem())
            config = ms_verifying.Config().use_certificate_verifier(certificate_chain=[pem])
            try:
                config.verify(folder, path)
            except Exception as exc:  # model-signing raises ValueError, OpenSSL errors, others
                why = _why(exc)
                if type(exc).__name__ == "X509StoreContextError" or "cannot be used for" in why:
                    untrusted = why
                else:
                    failure = why
                continue
            return ModelSigner(
                ca.entry.principals,
                ca.entry.fingerprint,
                ca.entry.line,
                method="certificate",
                certificate=signer_identity(chain[0]),
                authority=ca.sha256,
            )
    if failure:
        raise _mismatch(folder, path, failure)
    raise ModelSignatureUntrustedError(
        f"{SIGNATURE_NAME}'s certificate chain does not lead to a trusted CA: {untrusted}",
        path=str(path),
        field="verificationMaterial.x509CertificateChain",
        expected=f"a code-signing certificate issued by a CA trusted in {trust.path}",
        observed=f"signer {signer_identity(chain[0])}: {untrusted}"[:300],
        hint="do not trust this model; if the publisher's CA changed, add the new CA "
        "certificate: ftmanifest trust add CA.pem --principal NAME",
    )


def _mismatch(folder: Path, path: Path, failure: str) -> ModelSignatureMismatchError:
    changed = failure.startswith("Signature mismatch")
    return ModelSignatureMismatchError(
        f"{SIGNATURE_NAME} does not vouch for the files of {folder}: {failure}",
        path=str(path),
        field=SIGNATURE_NAME,
        expected="every file as the publisher signed it, and a signature that verifies",
        observed=failure[:300],
        hint=(
            "the model's files changed since the publisher signed them: download the model "
            "again, or find out who changed it"
            if changed
            else "the bundle was altered or is not this key's: do not trust this model; ask "
            "the publisher for its model.sig again"
        ),
    )


def _why(exc: BaseException) -> str:
    """model-signing's reason, its file lists kept and its raw digests left out."""
    text = str(exc).strip() or type(exc).__name__
    if type(exc).__name__ == "InvalidSignature":
        return "the bundle's signature does not verify with the trusted key"
    if not text.startswith("Signature mismatch"):
        return text.replace("\n", " ")
    # model-signing's text is the repr of a list of reasons: a reason holding a quote
    # is written with its quotes escaped (\'name\'), so a quote may follow a backslash
    q = r"\\?'"
    changed = re.findall(rf"Hash mismatch for {q}([^'\\]*){q}", text)
    extra = re.search(rf"Extra files found in model {q}[^'\\]*{q}: ([^\"'\]\\]*)", text)
    missing = re.search(rf"Missing files in model {q}[^'\\]*{q}: ([^\"'\]\\]*)", text)
    parts = [f"changed: {', '.join(changed)}"] if changed else []
    parts += [f"not signed: {extra.group(1)}"] if extra else []
    parts += [f"missing: {missing.group(1)}"] if missing else []
    if not parts:  # a reason not known here: as model-signing wrote it, cut short
        return text[:300]
    return "Signature mismatch: " + "; ".join(parts)


def cannot_write_reason(key: PrivateKey, key_path: Path) -> str | None:
    """Why ``model.sig`` cannot be made with this key (None: it can)."""
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        return (
            f"{SIGNATURE_NAME} not written: OpenSSF model-signing signs with elliptic-curve "
            "keys only, and this key is Ed25519 (make one with `ftmanifest keygen -f PATH "
            "--type ecdsa-p256` to hand off a model.sig too)"
        )
    if importlib.util.find_spec("model_signing") is None:
        return (
            f"{SIGNATURE_NAME} not written: the optional package model-signing is not "
            "installed (pip install 'ftmanifest[interop]'); the binding itself is complete"
        )
    head = read_untrusted(key_path, limit=KEY_MAX_BYTES, what="private key", hint="")[:64]
    if not head.lstrip().startswith(b"-----BEGIN") or b"OPENSSH" in head:
        return (
            f"{SIGNATURE_NAME} not written: model-signing reads PEM private keys, and this "
            f"ECDSA key is in OpenSSH format (convert a copy: ssh-keygen -p -m PKCS8 -f KEY)"
        )
    return None


class ModelSignatureMissingError(ModelSignatureError):
    """The manifest records a publisher signature, and ``model.sig`` is gone."""

    reason = "model-signature-missing"


def verify_publisher(
    folder: Path, manifest_path: Path, *, now: datetime | None = None
) -> ModelSigner:
    """``verify_model_signature`` with the trust file found for ``manifest_path``;
    no trust file is an untrusted signature (exit 1), not a missing input."""
    try:
        trust = load_trust(choose_trust_file(manifest_path).path)
    except TrustFileNotFoundError as exc:
        raise ModelSignatureUntrustedError(
            f"{SIGNATURE_NAME} is signed, and there is no trust file to say by whom",
            path=str(folder / SIGNATURE_NAME),
            field=SIGNATURE_NAME,
            expected="the publisher's key in the repository's trust file",
            observed=exc.message,
            hint="add the publisher's PEM public key: "
            "ftmanifest trust add PUB.pem --principal NAME",
        ) from None
    return verify_model_signature(folder, trust, now_or(now))
