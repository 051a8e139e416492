"""X.509 certificate authorities in the trust file, for certificate-signed ``model.sig``.

Layer: signing (edge: reads and writes the CA certificates beside the trust
file).  A trusted CA is two things: a line of the trust file,
``PRINCIPAL cert-authority,namespaces="x509-ca@ftmanifest" KEYTYPE KEY``, whose
key is the CA certificate's public key -- valid ``allowed_signers`` syntax, and
in a namespace no ftmanifest or ssh signature uses, so ssh-keygen never
accepts it for a manifest -- and the certificate itself in
``x509-ca/<sha256 of the key blob, hex>.pem`` beside the trust file, which
OpenSSL needs to build a chain.  The line is the trust: a certificate file
whose key is not the line's is refused, never used.  CA keys are Ed25519 or
ECDSA P-256 (the keys the trust file stores).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from ftmanifest.signing._files import KEY_MAX_BYTES
from ftmanifest.signing.errors import MalformedKeyError, UnsupportedKeyError
from ftmanifest.signing.keys import public_key_blob
from ftmanifest.signing.trust import X509_CA_NAMESPACE, TrustedKey
from ftmanifest.untrusted import read_untrusted

__all__ = [
    "X509_CA_NAMESPACE",
    "TrustedAuthority",
    "bundle_certificates",
    "certificate_path",
    "issued_by",
    "load_authority",
    "signer_identity",
]
CA_FOLDER = "x509-ca"
PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
_CA_FIX = "pass the publisher's CA certificate (PEM, basicConstraints CA:TRUE), not the leaf"


@dataclass(frozen=True)
class TrustedAuthority:
    """A CA certificate the trust file trusts, with its line."""

    entry: TrustedKey
    certificate: x509.Certificate
    path: Path

    @property
    def sha256(self) -> str:
        """The certificate's SHA-256 fingerprint (``sha256:`` and hex, over its DER)."""
        return "sha256:" + self.certificate.fingerprint(hashes.SHA256()).hex()

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


def certificate_path(trust: Path, blob: bytes) -> Path:
    """Where the CA certificate of the trust-file key ``blob`` is kept."""
    return trust.parent / CA_FOLDER / f"{hashlib.sha256(blob).hexdigest()}.pem"


def read_ca_certificate(data: bytes, path: Path) -> tuple[x509.Certificate, bytes]:
    """(the CA certificate in the PEM ``data``, its public key's OpenSSH blob).
    Refused: a PEM that is not one certificate, a certificate that is not a CA,
    a CA key the trust file cannot store."""
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise MalformedKeyError(
            f"not a readable PEM certificate: {exc}",
            path=str(path),
            expected="-----BEGIN CERTIFICATE----- (one X.509 CA certificate)",
            observed="a PEM block that does not parse",
            hint=_CA_FIX,
        ) from None
    if len(certs) != 1:
        raise MalformedKeyError(
            "the file holds several certificates: trust names one CA at a time",
            path=str(path),
            expected="one X.509 CA certificate",
            observed=f"{len(certs)} certificates",
            hint="split the chain and trust the CA you mean (the root, or the issuing CA)",
        )
    cert = certs[0]
    try:
        ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        ca = False
    except ValueError as exc:
        raise MalformedKeyError(
            f"the certificate's extensions do not parse: {exc}",
            path=str(path),
            expected="a well-formed X.509 CA certificate",
            observed=str(exc)[:120],
            hint=_CA_FIX,
        ) from None
    if not ca:
        raise MalformedKeyError(
            "this certificate is not a certificate authority: a leaf would trust one "
            "signer's certificate, and trust names the CA that issues them",
            path=str(path),
            expected="basicConstraints CA:TRUE",
            observed=f"a leaf certificate ({cert.subject.rfc4514_string()[:80]})",
            hint=_CA_FIX,
        )
    key = cert.public_key()
    try:
        blob = public_key_blob(key)  # type: ignore[arg-type]  # other kinds: refused below
    except (ValueError, AttributeError, TypeError):
        kind = type(key).__name__.lstrip("_")
        raise UnsupportedKeyError(
            f"this CA's key is {kind}: the trust file stores Ed25519 and ECDSA P-256 CA keys only",
            path=str(path),
            expected="a CA certificate with an Ed25519 or ECDSA P-256 key",
            observed=kind,
            hint="check the model with `model_signing verify certificate` instead, "
            "and remove model.sig before lock",
        ) from None
    return cert, blob


def load_authority(entry: TrustedKey, trust: Path) -> TrustedAuthority:
    """The CA certificate of the trust file's ``cert-authority`` line ``entry``;
    a missing file, or one whose key is not the line's, is refused."""
    path = certificate_path(trust, entry.blob)
    fix = (
        f"run `ftmanifest trust add CA.pem --principal {entry.principals[0]}` again with the "
        f"CA certificate, or delete line {entry.line} of {trust}"
    )
    try:
        data = read_untrusted(path, limit=KEY_MAX_BYTES, what="CA certificate", hint=fix)
    except FileNotFoundError:
        raise MalformedKeyError(
            f"the CA certificate of trust file line {entry.line} is missing",
            path=str(path),
            expected="the PEM certificate `ftmanifest trust add` wrote beside the trust file",
            observed="no such file",
            hint=fix,
        ) from None
    cert, blob = read_ca_certificate(data, path)
    if blob != entry.blob:
        raise MalformedKeyError(
            f"the CA certificate's key is not the key of trust file line {entry.line}",
            path=str(path),
            expected=f"a certificate for {entry.fingerprint}",
            observed="a certificate for another key",
            hint=fix,
        )
    return TrustedAuthority(entry, cert, path)


def bundle_certificates(material: dict[str, object]) -> list[x509.Certificate]:
    """The certificates of a bundle's ``x509CertificateChain``, the signer's first;
    ValueError naming what is wrong when they are not DER certificates."""
    import base64

    chain = material.get("x509CertificateChain")
    certs = chain.get("certificates") if isinstance(chain, dict) else None
    if not isinstance(certs, list) or not certs:
        raise ValueError("x509CertificateChain holds no certificates")
    out = []
    for item in certs:
        raw = item.get("rawBytes") if isinstance(item, dict) else None
        if not isinstance(raw, str):
            raise ValueError("a certificate of x509CertificateChain has no rawBytes")
        out.append(x509.load_der_x509_certificate(base64.b64decode(raw, validate=True)))
    return out


def issued_by(authority: TrustedAuthority, chain: list[x509.Certificate]) -> bool:
    """Whether ``authority`` may anchor ``chain``: it is in it, or names an issuer of it
    (a preselection only; OpenSSL, through model-signing, decides)."""
    own = authority.certificate
    return any(c == own or c.issuer == own.subject for c in chain)


def signer_identity(leaf: x509.Certificate) -> str:
    """The signing certificate's subject and subject alternative names, printable."""
    parts = [leaf.subject.rfc4514_string() or "(empty subject)"]
    try:
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (x509.ExtensionNotFound, ValueError):
        san = None
    if san is not None:
        names = [str(v) for v in san.get_values_for_type(x509.RFC822Name)]
        names += [str(v) for v in san.get_values_for_type(x509.UniformResourceIdentifier)]
        names += [str(v) for v in san.get_values_for_type(x509.DNSName)]
        if names:
            parts.append("SAN " + ", ".join(names))
    text = "; ".join(parts)
    return "".join(c if c.isprintable() else "?" for c in text)[:300]
