"""Keys: small-order and non-canonical Ed25519 keys, malformed key ids."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from signing_helpers import CANONICAL, NOW, repo

from ftmanifest.signing import errors as E
from ftmanifest.signing.dsse import PAYLOAD_TYPE, Envelope, Signature
from ftmanifest.signing.keys import KEY_TYPE, check_keyid, fingerprint_of_blob
from ftmanifest.signing.sign import envelope_path_for
from ftmanifest.signing.statement import statement_payload
from ftmanifest.signing.trust import parse_trust
from ftmanifest.signing.verify import verify_manifest_signature

P = 2**255 - 19
C8 = 2707385501144840649318225287225658788936804267575313519463743609750303402022


def encode(y: int, sign: int = 0) -> bytes:
    return (y | (sign << 255)).to_bytes(32, "little")


# The 8 points of order 1, 2, 4 and 8 (libsodium's blocklist, canonical forms).
SMALL_ORDER = {
    "identity": encode(1),
    "order 2": encode(P - 1),
    "order 4, +x": encode(0),
    "order 4, -x": encode(0, 1),
    "order 8, y=c, +x": encode(C8),
    "order 8, y=c, -x": encode(C8, 1),
    "order 8, y=p-c, +x": encode(P - C8),
    "order 8, y=p-c, -x": encode(P - C8, 1),
}


def blob(raw: bytes) -> bytes:
    return b"".join(struct.pack(">I", len(x)) + x for x in (KEY_TYPE.encode(), raw))


def line(raw: bytes) -> str:
    b64 = base64.b64encode(blob(raw)).decode()
    return f'mallory@x namespaces="ftmanifest" {KEY_TYPE} {b64}'


@pytest.mark.parametrize("raw", SMALL_ORDER.values(), ids=SMALL_ORDER.keys())
def test_small_order_keys_are_refused_in_the_trust_file(raw: bytes) -> None:
    with pytest.raises(E.WeakKeyError) as info:
        parse_trust("# team\n" + line(raw) + "\n", Path("allowed_signers"))
    assert info.value.line == 2 and info.value.exit_code == 2
    assert "small-order" in info.value.message


@pytest.mark.parametrize("y", [P, P + 1, P + 2, 2**255 - 1])
def test_non_canonical_keys_are_refused(y: int) -> None:
    with pytest.raises(E.WeakKeyError) as info:
        parse_trust(line(encode(y)), Path("allowed_signers"))
    assert "not canonically encoded" in info.value.message


def test_the_identity_key_forgery_is_refused_end_to_end(tmp_path: Path) -> None:
    """With the identity point as a trusted key, R=identity, S=0 signs anything."""
    identity = SMALL_ORDER["identity"]
    forged = identity + bytes(32)
    Ed25519PublicKey.from_public_bytes(identity).verify(forged, b"any message")  # OpenSSL agrees
    manifest = repo(tmp_path, [line(identity)])
    payload = statement_payload(manifest.name, CANONICAL)
    keyid = fingerprint_of_blob(blob(identity))
    envelope = Envelope(PAYLOAD_TYPE, payload, (Signature(keyid, forged),))
    envelope_path_for(manifest).write_bytes(envelope.to_bytes())
    with pytest.raises(E.WeakKeyError):
        verify_manifest_signature(manifest, CANONICAL, now=NOW)


@pytest.mark.parametrize(
    ("keyid", "ok"),
    [
        ("SHA256:" + "A" * 43, True),
        ("SHA256:" + "A" * 42 + "B", False),  # stray low bits: not a canonical encoding
        ("SHA256:" + "A" * 42, False),
        ("SHA256:" + "A" * 43 + "=", False),
        ("sha256:" + "A" * 43, False),
        ("SHA256:" + "A" * 42 + "-", False),
        ("MD5:" + "aa:" * 15 + "aa", False),
        ("SHA256:" + "A" * 42 + "\u0410", False),
    ],
)
def test_keyid_shape(keyid: str, ok: bool) -> None:
    assert check_keyid(keyid) is ok


def test_envelope_with_a_malformed_keyid_is_refused(tmp_path: Path) -> None:
    manifest = repo(tmp_path, [])
    envelope = Envelope(PAYLOAD_TYPE, b"{}", (Signature("alice's key", bytes(64)),))
    envelope_path_for(manifest).write_bytes(envelope.to_bytes())
    with pytest.raises(E.MalformedKeyIdError) as info:
        verify_manifest_signature(manifest, CANONICAL, now=NOW)
    assert info.value.field == "signatures[0].keyid" and info.value.exit_code == 2
