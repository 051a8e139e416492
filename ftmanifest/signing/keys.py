"""Signing keys: Ed25519 (the default) and ECDSA P-256; generate, load, fingerprint.

Layer: signing (edge: reads and writes key files).  Ed25519 keys are the
files ``ssh-keygen -t ed25519`` makes, so existing SSH signing keys work.
ECDSA P-256 keys (``ecdsa-sha2-nistp256``) exist for the hand-off to OpenSSF
model-signing, which signs with elliptic-curve keys only: ``keygen`` writes
them as PKCS#8 PEM (what ``model_signing sign key`` reads) with the public key
both as an OpenSSH line and as PEM.  Either kind signs DSSE envelopes: Ed25519
over the PAE, ECDSA with SHA-256 over the PAE, DER-encoded (as DSSE and
Sigstore do).  The key id is the OpenSSH fingerprint (``SHA256:`` + unpadded
base64 of the sha256 of the public key blob), which is what ``ssh-keygen -l``
prints.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ftmanifest.fsutil import atomic_write_bytes as write_atomic
from ftmanifest.signing._files import KEY_MAX_BYTES
from ftmanifest.signing.errors import (
    BadPassphraseError,
    InsecureKeyPermissionsError,
    KeyExistsError,
    KeyNotFoundError,
    MalformedKeyError,
    PublicKeyGivenError,
    UnsupportedKeyError,
    WeakKeyError,
    WriteFailedError,
)
from ftmanifest.untrusted import read_untrusted

KEY_TYPE = "ssh-ed25519"
ECDSA_KEY_TYPE = "ecdsa-sha2-nistp256"
SIGNING_KEY_TYPES = (KEY_TYPE, ECDSA_KEY_TYPE)
"""The OpenSSH key types that sign and verify ftmanifest statements."""
_ECDSA_CURVE = b"nistp256"
KeyKind = Literal["ed25519", "ecdsa-p256"]
PrivateKey = Ed25519PrivateKey | ec.EllipticCurvePrivateKey
PublicKey = Ed25519PublicKey | ec.EllipticCurvePublicKey
PassphraseSource = Callable[[], bytes]
KEYID = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")
"""An OpenSSH SHA256 fingerprint: unpadded base64 of 32 bytes."""
_P = 2**255 - 19
# y coordinates (mod p) of the 8 points of order dividing 8 on edwards25519:
# the identity (1), order 2 (p-1), order 4 (0, two points), order 8 (four points).
_C8 = 2707385501144840649318225287225658788936804267575313519463743609750303402022
_SMALL_ORDER_Y = frozenset({0, 1, _P - 1, _C8, _P - _C8})


def check_public_key_bytes(raw: bytes) -> None:
    """Refuse a non-canonical (y >= p) or small-order Ed25519 point encoding.

    OpenSSL verifies signatures under such keys (RFC 8032 does not forbid
    them): with the identity point as the key, ``R = identity, S = 0`` is a
    valid signature of every message.
    """
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    if y >= _P:
        raise WeakKeyError(
            "Ed25519 public key is not canonically encoded (y >= p)",
            expected="a key made by ssh-keygen or ftmanifest keygen",
            observed=raw.hex(),
            hint="remove this key; it was not made by a real key generator",
        )
    if y in _SMALL_ORDER_Y:
        raise WeakKeyError(
            "Ed25519 public key is a small-order point: anyone can forge its signatures",
            expected="a key made by ssh-keygen or ftmanifest keygen",
            observed=raw.hex(),
            hint="remove this key from the trust file; it trusts a forger",
        )


def check_keyid(keyid: str) -> bool:
    """True when ``keyid`` has the shape of an OpenSSH SHA256 fingerprint."""
    if not KEYID.fullmatch(keyid):
        return False
    try:
        raw = base64.b64decode(keyid[7:] + "=", validate=True)
    except ValueError:  # pragma: no cover - the pattern already allows only base64
        return False
    return base64.b64encode(raw).decode("ascii").rstrip("=") == keyid[7:]


def _ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _is_p256(key: ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey) -> bool:
    return isinstance(key.curve, ec.SECP256R1)


def public_key_blob(key: PublicKey) -> bytes:
    """The SSH wire-format public key blob (RFC 8709 section 4, RFC 5656 section 3.1)."""
    if isinstance(key, Ed25519PublicKey):
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return _ssh_string(KEY_TYPE.encode()) + _ssh_string(raw)
    if not _is_p256(key):
        raise ValueError(f"ECDSA keys on {key.curve.name} are not supported (P-256 only)")
    point = key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return _ssh_string(ECDSA_KEY_TYPE.encode()) + _ssh_string(_ECDSA_CURVE) + _ssh_string(point)


def fingerprint_of_blob(blob: bytes) -> str:
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii")
    return "SHA256:" + digest.rstrip("=")


def fingerprint(key: PublicKey) -> str:
    """OpenSSH SHA256 fingerprint, the key id used in envelopes."""
    return fingerprint_of_blob(public_key_blob(key))


def _blob_fields(blob: bytes) -> list[bytes]:
    fields: list[bytes] = []
    pos = 0
    while pos < len(blob) and len(fields) < 3:
        if pos + 4 > len(blob):
            raise ValueError("truncated key blob")
        (size,) = struct.unpack(">I", blob[pos : pos + 4])
        pos += 4
        if pos + size > len(blob):
            raise ValueError("truncated key blob")
        fields.append(blob[pos : pos + size])
        pos += size
    if pos != len(blob):
        raise ValueError("key blob holds more than a type and a key")
    return fields


def public_key_from_blob(blob: bytes) -> PublicKey:
    """Parse an ``ssh-ed25519`` or ``ecdsa-sha2-nistp256`` blob; ``ValueError`` names the defect."""
    fields = _blob_fields(blob)
    if fields and fields[0] == ECDSA_KEY_TYPE.encode():
        if len(fields) != 3 or fields[1] != _ECDSA_CURVE:
            raise ValueError("ecdsa-sha2-nistp256 key blob does not name the nistp256 curve")
        if len(fields[2]) != 65 or fields[2][0] != 4:
            raise ValueError("ECDSA P-256 key is not an uncompressed 65-byte point")
        # from_encoded_point refuses a point that is not on the curve
        return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), fields[2])
    if len(fields) != 2:
        raise ValueError("key blob does not hold exactly a type and a key")
    if fields[0] != KEY_TYPE.encode():
        raise ValueError(f"key blob type is {fields[0][:40]!r}, not {KEY_TYPE} or {ECDSA_KEY_TYPE}")
    if len(fields[1]) != 32:
        raise ValueError(f"Ed25519 key is {len(fields[1])} bytes, not 32")
    check_public_key_bytes(fields[1])
    return Ed25519PublicKey.from_public_bytes(fields[1])


def key_type_of_blob(blob: bytes) -> str:
    """The OpenSSH key type a (valid) blob names."""
    return _blob_fields(blob)[0].decode("ascii", "replace")


def sign_message(key: PrivateKey, message: bytes) -> bytes:
    """Ed25519 over ``message``, or ECDSA P-256 with SHA-256 (DER-encoded)."""
    if isinstance(key, Ed25519PrivateKey):
        return key.sign(message)
    return key.sign(message, ec.ECDSA(hashes.SHA256()))


def verify_message(key: PublicKey, signature: bytes, message: bytes) -> None:
    """Raise ``cryptography.exceptions.InvalidSignature`` unless ``signature`` is
    ``key``'s over ``message``."""
    if isinstance(key, Ed25519PublicKey):
        key.verify(signature, message)
    else:
        key.verify(signature, message, ec.ECDSA(hashes.SHA256()))


def public_key_pem(key: PublicKey) -> bytes:
    """The public key as PEM (SubjectPublicKeyInfo), as model-signing reads it."""
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def public_key_line(key: PublicKey, comment: str = "") -> str:
    blob = public_key_blob(key)
    line = f"{key_type_of_blob(blob)} {base64.b64encode(blob).decode('ascii')}"
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
    low = str(exc).lower()
    if "checksum" in low or "incorrect password" in low or "bad decrypt" in low:
        return BadPassphraseError(
            "wrong passphrase for private key",
            path=str(path),
            hint="check the passphrase (the value of --passphrase-env's variable)",
        )
    return MalformedKeyError(
        f"not an OpenSSH or PEM private key: {exc}",
        path=str(path),
        expected="-----BEGIN OPENSSH PRIVATE KEY----- (ssh-keygen -t ed25519) "
        "or -----BEGIN PRIVATE KEY----- (ftmanifest keygen --type ecdsa-p256)",
        hint="use a key made by `ftmanifest keygen` or `ssh-keygen -t ed25519`",
    )


def _load(data: bytes, password: bytes | None, path: Path) -> object:
    """cryptography's loader (OpenSSH format, else PEM: PKCS#8 or SEC1).
    TypeError ("password-protected, but password was not provided") passes
    through on the first, password-less try."""
    openssh = b"-----BEGIN OPENSSH PRIVATE KEY-----" in data[:200]
    pem = not openssh and data.lstrip().startswith(b"-----BEGIN ")
    try:
        if pem:
            return serialization.load_pem_private_key(data, password=password)
        return serialization.load_ssh_private_key(data, password=password)
    except TypeError as exc:
        if password is None:
            raise
        raise _unreadable(exc, path) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise _unreadable(exc, path) from None


def _read_key_file(path: Path) -> bytes:
    hint = "pass the private key file made by `ftmanifest keygen` or `ssh-keygen -t ed25519`"
    try:
        data = read_untrusted(path, limit=KEY_MAX_BYTES, what="private key", hint=hint)
    except FileNotFoundError:
        raise KeyNotFoundError(
            "private key not found",
            path=str(path),
            hint="create one with `ftmanifest keygen -f PATH` or pass --key PATH",
        ) from None
    head = data.lstrip()[:64]
    public = (b"BEGIN SSH2 PUBLIC KEY", b"BEGIN PUBLIC KEY")
    if head.startswith((b"ssh-", b"ecdsa-", b"sk-")) or any(p in head for p in public):
        stem = path.name.removesuffix(".pem").removesuffix(".pub")
        private = path.with_name(stem) if stem != path.name else None
        raise PublicKeyGivenError(
            "this is a public key; signing needs the private key",
            path=str(path),
            expected="the private key (-----BEGIN OPENSSH PRIVATE KEY-----)",
            observed="a public key line",
            hint=f"pass --key {private}" if private else "pass the private key file (not .pub)",
        )
    return data


def load_private_key(path: Path, passphrase: PassphraseSource | None = None) -> PrivateKey:
    """Load an Ed25519 or ECDSA P-256 private key (OpenSSH format or PEM),
    asking ``passphrase()`` only if needed."""
    data = _read_key_file(path)
    check_private_key_mode(path)
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
        secret = passphrase()
        if not secret:
            raise BadPassphraseError(
                "empty passphrase for an encrypted private key",
                path=str(path),
                expected="the key's passphrase",
                observed="an empty passphrase",
                hint="check the passphrase (the value of --passphrase-env's variable)",
            ) from None
        key = _load(data, secret, path)
    if isinstance(key, Ed25519PrivateKey):
        return key
    if isinstance(key, ec.EllipticCurvePrivateKey) and _is_p256(key):
        return key
    observed = type(key).__name__.replace("PrivateKey", "").lstrip("_") or "other"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        observed = f"ECDSA on {key.curve.name}"
    raise UnsupportedKeyError(
        "only Ed25519 and ECDSA P-256 keys can sign",
        path=str(path),
        expected=f"{KEY_TYPE} or {ECDSA_KEY_TYPE}",
        observed=observed,
        hint="create a key: ftmanifest keygen -f PATH (Ed25519) "
        "or ftmanifest keygen -f PATH --type ecdsa-p256",
    )


def key_pair_paths(path: Path, kind: KeyKind = "ed25519") -> tuple[Path, ...]:
    """The files ``generate_key_pair`` writes: PATH, PATH.pub (and PATH.pub.pem for ECDSA)."""
    pub = path.with_name(path.name + ".pub")
    return (path, pub) if kind == "ed25519" else (path, pub, pub.with_name(pub.name + ".pem"))


def generate_key_pair(
    path: Path,
    *,
    comment: str = "",
    passphrase: bytes | None = None,
    kind: KeyKind = "ed25519",
) -> str:
    """Write PATH (0600) and PATH.pub (the OpenSSH line); return the fingerprint.

    Ed25519 (the default) is written in OpenSSH format; ``kind="ecdsa-p256"``
    writes PATH as PKCS#8 PEM (what model-signing reads) and the public key
    also as PEM at PATH.pub.pem.  Refuses to overwrite any of them.  The
    private key is created with O_CREAT|O_EXCL and mode 0600, so it is never
    readable by others, not even for an instant.
    """
    paths = key_pair_paths(path, kind)
    pub_path = paths[1]
    for existing in paths:
        if existing.exists() or existing.is_symlink():
            raise KeyExistsError(
                "key file already exists; refusing to overwrite it",
                path=str(existing),
                hint="choose another path with -f, or delete the old key pair first",
            )
    key: PrivateKey = (
        Ed25519PrivateKey.generate()
        if kind == "ed25519"
        else ec.generate_private_key(ec.SECP256R1())
    )
    form = (
        serialization.PrivateFormat.OpenSSH
        if kind == "ed25519"
        else serialization.PrivateFormat.PKCS8
    )
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    try:
        pem = key.private_bytes(serialization.Encoding.PEM, form, encryption)
    except UnsupportedAlgorithm as exc:
        raise UnsupportedKeyError(
            f"cannot encrypt the key: {exc}",
            path=str(path),
            hint="install the `bcrypt` package (pip install bcrypt) or use --no-passphrase",
        ) from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise write_failed(exc, path, "private key") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as exc:
        path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise write_failed(exc, path, "private key") from None
        raise
    public = key.public_key()
    written = [(pub_path, (public_key_line(public, comment) + "\n").encode())]
    if len(paths) == 3:
        written.append((paths[2], public_key_pem(public)))
    for target, data in written:
        try:
            write_atomic(target, data, mode=0o644)
        except OSError as exc:
            for done in paths[: paths.index(target)]:
                done.unlink(missing_ok=True)
            raise write_failed(exc, target, "public key") from None
    return fingerprint(public)


def write_failed(exc: OSError, path: Path, what: str) -> WriteFailedError:
    """A failed write as a clean input error (exit 2), naming the path."""
    return WriteFailedError(
        f"cannot write the {what}: {exc.strerror or exc}",
        path=str(path),
        expected="a writable folder that exists, and no folder where the file goes",
        observed=exc.strerror or type(exc).__name__,
        hint="choose another path, or create the folder / fix its permissions",
    )
