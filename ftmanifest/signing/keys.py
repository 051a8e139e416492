"""Ed25519 keys in OpenSSH format: generate, load, fingerprint.

Layer: signing (edge: reads and writes key files).  Keys are the same files
``ssh-keygen -t ed25519`` makes, so existing SSH signing keys work.  The key id
is the OpenSSH fingerprint (``SHA256:`` + unpadded base64 of the sha256 of the
public key blob), which is what ``ssh-keygen -l`` prints.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from collections.abc import Callable
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ftmanifest.signing._io import write_atomic
from ftmanifest.signing.errors import (
    BadPassphraseError,
    InsecureKeyPermissionsError,
    KeyExistsError,
    KeyNotFoundError,
    MalformedKeyError,
    UnsupportedKeyError,
)

KEY_TYPE = "ssh-ed25519"
PassphraseSource = Callable[[], bytes]


def _ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def public_key_blob(key: Ed25519PublicKey) -> bytes:
    """The SSH wire-format public key blob (RFC 8709 section 4)."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _ssh_string(KEY_TYPE.encode()) + _ssh_string(raw)


def fingerprint_of_blob(blob: bytes) -> str:
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii")
    return "SHA256:" + digest.rstrip("=")


def fingerprint(key: Ed25519PublicKey) -> str:
    """OpenSSH SHA256 fingerprint, the key id used in envelopes."""
    return fingerprint_of_blob(public_key_blob(key))


def public_key_from_blob(blob: bytes) -> Ed25519PublicKey:
    """Parse an ``ssh-ed25519`` blob; ``ValueError`` names the defect."""
    fields: list[bytes] = []
    pos = 0
    while pos < len(blob) and len(fields) < 2:
        if pos + 4 > len(blob):
            raise ValueError("truncated key blob")
        (size,) = struct.unpack(">I", blob[pos : pos + 4])
        pos += 4
        if pos + size > len(blob):
            raise ValueError("truncated key blob")
        fields.append(blob[pos : pos + size])
        pos += size
    if len(fields) != 2 or pos != len(blob):
        raise ValueError("key blob does not hold exactly a type and a key")
    if fields[0] != KEY_TYPE.encode():
        raise ValueError(f"key blob type is {fields[0][:40]!r}, not {KEY_TYPE}")
    if len(fields[1]) != 32:
        raise ValueError(f"Ed25519 key is {len(fields[1])} bytes, not 32")
    return Ed25519PublicKey.from_public_bytes(fields[1])


def public_key_line(key: Ed25519PublicKey, comment: str = "") -> str:
    line = f"{KEY_TYPE} {base64.b64encode(public_key_blob(key)).decode('ascii')}"
    return f"{line} {comment}" if comment else line


def check_private_key_mode(path: Path) -> None:
    """Refuse a private key that other users can read (like ssh does)."""
    if os.name == "nt":  # pragma: no cover - POSIX modes do not apply
        return
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise InsecureKeyPermissionsError(
            "private key is readable by other users",
            path=str(path),
            expected="mode 0600 (owner only)",
            observed=f"mode {mode:04o}",
            hint=f"chmod 600 {path}",
        )


def _unreadable(exc: Exception, path: Path) -> Exception:
    """Turn cryptography's loader failure into our error naming the fix."""
    if isinstance(exc, UnsupportedAlgorithm):
        return UnsupportedKeyError(
            f"cannot read this private key: {exc}",
            path=str(path),
            hint="encrypted OpenSSH keys need the `bcrypt` package: pip install bcrypt",
        )
    if "checksum" in str(exc).lower():
        return BadPassphraseError(
            "wrong passphrase for private key",
            path=str(path),
            hint="check the passphrase (the value of --passphrase-env's variable)",
        )
    return MalformedKeyError(
        f"not an OpenSSH private key: {exc}",
        path=str(path),
        expected="-----BEGIN OPENSSH PRIVATE KEY----- (ssh-keygen -t ed25519)",
        hint="use a key made by `ftmanifest keygen` or `ssh-keygen -t ed25519`",
    )


def _load(data: bytes, password: bytes | None, path: Path) -> object:
    """cryptography's loader.  TypeError ("password-protected, but password was
    not provided") passes through on the first, password-less try."""
    try:
        return serialization.load_ssh_private_key(data, password=password)
    except TypeError as exc:
        if password is None:
            raise
        raise _unreadable(exc, path) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise _unreadable(exc, path) from None


def load_private_key(path: Path, passphrase: PassphraseSource | None = None) -> Ed25519PrivateKey:
    """Load an OpenSSH-format Ed25519 private key, asking ``passphrase()`` only if needed."""
    if not path.is_file():
        raise KeyNotFoundError(
            "private key not found",
            path=str(path),
            hint="create one with `ftmanifest keygen -f PATH` or pass --key PATH",
        )
    check_private_key_mode(path)
    data = path.read_bytes()
    try:
        key = _load(data, None, path)
    except TypeError:  # encrypted: "password-protected, but password was not provided"
        if passphrase is None:
            raise BadPassphraseError(
                "private key is encrypted and no passphrase was given",
                path=str(path),
                hint="pass --passphrase-env VAR (the name of a variable holding it) "
                "or run in a terminal to be asked",
            ) from None
        key = _load(data, passphrase(), path)
    if not isinstance(key, Ed25519PrivateKey):
        raise UnsupportedKeyError(
            "only Ed25519 keys can sign manifests",
            path=str(path),
            expected="ssh-ed25519",
            observed=type(key).__name__.replace("PrivateKey", "").lstrip("_") or "other",
            hint="create an Ed25519 key: ftmanifest keygen -f PATH",
        )
    return key


def generate_key_pair(path: Path, *, comment: str = "", passphrase: bytes | None = None) -> str:
    """Write PATH (0600, OpenSSH format) and PATH.pub; return the fingerprint.

    Refuses to overwrite either file.  The private key is created with
    O_CREAT|O_EXCL and mode 0600, so it is never readable by others, not even
    for an instant.
    """
    pub_path = path.with_name(path.name + ".pub")
    for existing in (path, pub_path):
        if existing.exists() or existing.is_symlink():
            raise KeyExistsError(
                "key file already exists; refusing to overwrite it",
                path=str(existing),
                hint="choose another path with -f, or delete the old key pair first",
            )
    key = Ed25519PrivateKey.generate()
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    try:
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, encryption
        )
    except UnsupportedAlgorithm as exc:
        raise UnsupportedKeyError(
            f"cannot encrypt the key: {exc}",
            path=str(path),
            hint="install the `bcrypt` package (pip install bcrypt) or use --no-passphrase",
        ) from None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    public = key.public_key()
    write_atomic(pub_path, (public_key_line(public, comment) + "\n").encode(), mode=0o644)
    return fingerprint(public)
