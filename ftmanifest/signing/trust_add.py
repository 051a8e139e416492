"""Add a public key to the repository's trust file (``.ftmanifest/allowed_signers``).

Layer: signing (edge: reads a public key file, writes the trust file).  The
line written is the one ``trust`` reads back:
``PRINCIPAL namespaces="ftmanifest" KEYTYPE KEY [comment]``.  The public
key is an OpenSSH line (``ssh-ed25519`` or ``ecdsa-sha2-nistp256``) or a PEM
public key (``-----BEGIN PUBLIC KEY-----``, as model-signing publishers hand
out); a PEM key is written as its OpenSSH line.  A PEM X.509 CA certificate
(``-----BEGIN CERTIFICATE-----``, basicConstraints CA:TRUE) is trusted for
certificate-signed ``model.sig``: its key is written as a ``cert-authority``
line for ``x509-ca@ftmanifest`` and the certificate beside the trust file
(``x509_ca``); a leaf certificate is refused.  Refused before anything is
written: a key that is not an Ed25519 or ECDSA P-256 public key, a
principal ssh would read as something else, a key the file already trusts,
an existing file that does not parse, and a trust file or folder that
another user could change (the same StrictModes check verify applies).  The
new file is written whole (temp file, fsync, rename), mode 0644; a missing
``.ftmanifest`` folder is created 0755.  Two ``trust add`` at once may lose
one line (the last rename wins); the file is never half-written.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ftmanifest.errors import UsageError
from ftmanifest.fsutil import atomic_write_bytes
from ftmanifest.probe.git import repository_root
from ftmanifest.signing._files import KEY_MAX_BYTES, TRUST_MAX_BYTES, _insecure, check_strict_modes
from ftmanifest.signing._ssh_line import KEY_TYPES
from ftmanifest.signing._strict import b64decode_strict
from ftmanifest.signing.errors import (
    InsecureTrustPathError,
    KeyExistsError,
    KeyNotFoundError,
    MalformedKeyError,
    MalformedTrustFileError,
    UnsupportedKeyError,
)
from ftmanifest.signing.keys import (
    KEY_TYPE,
    SIGNING_KEY_TYPES,
    fingerprint_of_blob,
    key_type_of_blob,
    public_key_blob,
    public_key_from_blob,
)
from ftmanifest.signing.locate import DEFAULT_TRUST
from ftmanifest.signing.trust import NAMESPACE, parse_trust
from ftmanifest.signing.x509_ca import (
    PEM_CERTIFICATE,
    X509_CA_NAMESPACE,
    certificate_path,
    read_ca_certificate,
)
from ftmanifest.untrusted import read_untrusted

if TYPE_CHECKING:
    from cryptography import x509

_KEY_FIX = "pass the .pub (or .pub.pem) file made by `ftmanifest keygen` or `ssh-keygen -t ed25519`"
_TYPES = " or ".join(SIGNING_KEY_TYPES)
# Characters that would end or split an ssh principal list (sshsig.c strdelimw).
_NOT_IN_PRINCIPAL = frozenset(' \t",#')


@dataclass(frozen=True)
class Added:
    """What ``add_trusted_key`` wrote."""

    path: Path
    line: str
    principal: str
    fingerprint: str
    created: bool


def repository_trust_file(start: Path) -> tuple[Path, Path]:
    """(the trust file, the folder that holds ``.ftmanifest``): at the root of
    the git work tree holding ``start``, else in ``start`` itself -- where
    ``locate.choose_trust_file`` looks for it."""
    start = Path(os.path.abspath(start))
    root = repository_root(start)
    stop = root if root is not None else start
    return stop / DEFAULT_TRUST, stop


def check_principal(principal: str) -> None:
    bad = sorted({c for c in principal if c in _NOT_IN_PRINCIPAL or not c.isprintable()})
    if principal and not bad:
        return
    raise UsageError(
        "this principal cannot be written to an allowed_signers line",
        field="--principal",
        expected="one name without spaces, commas or quotes (e.g. alice@example.org)",
        observed=repr(principal) if principal else "an empty principal",
        hint="name the signer by one e-mail address: --principal alice@example.org",
    )


def read_public_key(path: Path) -> tuple[bytes, str, x509.Certificate | None]:
    """(the key blob, its comment, the CA certificate when the file is one) of an
    OpenSSH or PEM public key file, or of a PEM CA certificate."""
    try:
        data = read_untrusted(path, limit=KEY_MAX_BYTES, what="public key", hint=_KEY_FIX)
    except FileNotFoundError:
        raise KeyNotFoundError(
            "public key not found",
            path=str(path),
            hint="create a key pair with `ftmanifest keygen -f PATH` and pass PATH.pub",
        ) from None
    text = data.decode("utf-8", errors="replace").strip()
    if text.startswith("-----BEGIN PUBLIC KEY-----"):
        return _pem_public_key(data, path), "", None
    if text.startswith(PEM_CERTIFICATE.decode()):
        cert, blob = read_ca_certificate(data, path)
        return blob, "", cert
    if text.startswith("-----BEGIN"):
        raise MalformedKeyError(
            "this is a private key: trust needs the public key, and the private key must "
            "stay with its owner",
            path=str(path),
            expected="a public key line (ssh-ed25519 AAAA... [comment]) or a PEM public key",
            observed=text.splitlines()[0][:60],
            hint=f"pass {path}.pub (made beside it by `ftmanifest keygen`)",
        )
    words = text.splitlines()[0].split(None, 2) if text else []
    keytype = words[0] if words else ""
    if keytype not in SIGNING_KEY_TYPES and keytype in KEY_TYPES:
        raise UnsupportedKeyError(
            f"{keytype[:40]} keys cannot sign (Ed25519 and ECDSA P-256 only)",
            path=str(path),
            expected=_TYPES,
            observed=keytype[:40],
            hint="create a key: ftmanifest keygen -f PATH, then trust PATH.pub",
        )
    try:
        if keytype not in SIGNING_KEY_TYPES or len(words) < 2:
            raise ValueError(f"no {_TYPES} key on the first line")
        blob = b64decode_strict(words[1])
        public_key_from_blob(blob)
        if key_type_of_blob(blob) != keytype:
            raise ValueError(f"the key is not of the type the line names ({keytype})")
    except ValueError as exc:
        raise MalformedKeyError(
            f"not an {keytype if keytype in SIGNING_KEY_TYPES else KEY_TYPE} public key: {exc}",
            path=str(path),
            expected=f"{_TYPES} AAAA... [comment] (one line)",
            observed=(text.splitlines()[0][:60] if text else "an empty file"),
            hint=f"{_KEY_FIX}; create one with `ftmanifest keygen -f PATH`",
        ) from None
    comment = words[2].strip() if len(words) > 2 else ""
    return blob, comment if comment.isprintable() else "", None


def _pem_public_key(data: bytes, path: Path) -> bytes:
    """The OpenSSH blob of a PEM (SubjectPublicKeyInfo) Ed25519 or ECDSA P-256 key."""
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        key = load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise MalformedKeyError(
            f"not a readable PEM public key: {exc}",
            path=str(path),
            expected="-----BEGIN PUBLIC KEY----- (an Ed25519 or ECDSA P-256 key)",
            observed="a PEM block that does not parse",
            hint=_KEY_FIX,
        ) from None
    try:
        return public_key_blob(key)  # type: ignore[arg-type]  # other kinds: refused below
    except (ValueError, AttributeError, TypeError):
        raise UnsupportedKeyError(
            f"{type(key).__name__.lstrip('_')} keys cannot sign (Ed25519 and ECDSA P-256 only)",
            path=str(path),
            expected=_TYPES,
            observed=type(key).__name__.lstrip("_"),
            hint="ask the publisher for an Ed25519 or ECDSA P-256 public key",
        ) from None


def _check_folders(folder: Path, stop: Path) -> None:
    """Refuse when another user could change ``folder`` or one above it up to ``stop``."""
    item = folder
    while True:
        why = _insecure(item, item.stat())
        if why is not None:
            raise InsecureTrustPathError(
                f"refusing to write the trust file: folder {item} is {why}",
                path=str(item),
                expected="owned by you or root and not writable by group or others "
                "(verify refuses a trust file under such a folder, like ssh's StrictModes)",
                observed=why,
                hint=f"chmod go-w {item}, then run the command again",
            )
        if item == stop or item.parent == item:
            return
        item = item.parent


def _make_folder(folder: Path, trust: Path) -> None:
    if folder.exists():
        return
    try:
        folder.mkdir(mode=0o755, parents=True)
    except OSError as exc:
        from ftmanifest.fsutil import write_error

        raise write_error(exc, trust, "cannot create the trust file's folder") from None


def add_trusted_key(trust: Path, public_key: Path, principal: str, stop: Path) -> Added:
    """Append ``public_key`` for ``principal`` to the trust file ``trust``;
    ``stop`` is the folder up to which the modes are checked (the repository root)."""
    check_principal(principal)
    blob, comment, certificate = read_public_key(public_key)
    fp = fingerprint_of_blob(blob)
    folder = trust.parent
    _make_folder(folder, trust)
    _check_folders(folder, Path(os.path.abspath(stop)))
    old = b""
    created = not trust.exists()
    if not created:
        check_strict_modes(trust, stop)
        old = read_untrusted(
            trust,
            limit=TRUST_MAX_BYTES,
            what="trust file (allowed signers)",
            hint="fix the trust file, or pass --trust PATH to write another one",
        )
    try:
        text = old.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedTrustFileError(
            "trust file is not UTF-8 text", path=str(trust), hint="rewrite it as UTF-8 text"
        ) from None
    store = parse_trust(text, trust)
    for key in (*store.by_fingerprint(fp), *(a for a in store.authorities if a.fingerprint == fp)):
        raise KeyExistsError(
            "this key is already in the trust file",
            path=str(trust),
            line=key.line,
            expected=f"a key not yet trusted ({fp})",
            observed=f"line {key.line} trusts it for {','.join(key.principals)}",
            hint=f"edit line {key.line} of {trust} to change its principal or options",
        )
    b64 = base64.b64encode(blob).decode("ascii")
    options = f'namespaces="{NAMESPACE}"'
    if certificate is not None:
        options = f'cert-authority,namespaces="{X509_CA_NAMESPACE}"'
        comment = "x509-ca"
    line = f"{principal} {options} {key_type_of_blob(blob)} {b64}" + (
        f" {comment}" if comment else ""
    )
    new = text + ("\n" if text and not text.endswith("\n") else "") + line + "\n"
    parse_trust(new, trust)  # what verify will read must parse
    if certificate is not None:
        from cryptography.hazmat.primitives.serialization import Encoding

        pem = certificate_path(trust, blob)
        _make_folder(pem.parent, trust)
        atomic_write_bytes(pem, certificate.public_bytes(Encoding.PEM), mode=0o644)
    atomic_write_bytes(trust, new.encode("utf-8"), mode=0o644)
    return Added(trust, line, principal, fp, created)
