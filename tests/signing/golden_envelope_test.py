"""Golden envelopes: the exact bytes ``sign_manifest`` writes for fixed inputs.

Ed25519 signatures are deterministic (RFC 8032), so a fixed key and manifest
give one envelope; any change to the statement, its canonical form or the
envelope layout shows up here.  Regenerate deliberately with
``FTMANIFEST_UPDATE_GOLDEN=1`` (and say why in the commit).
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signing_helpers import CANONICAL

from ftmanifest.signing.sign import envelope_path_for, sign_manifest

GOLDEN = Path(__file__).with_name("golden")
UPDATE = os.environ.get("FTMANIFEST_UPDATE_GOLDEN") == "1"
KEY_A = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
KEY_B = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))


def _check(name: str, data: bytes) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_bytes(data)
    assert data == path.read_bytes(), f"{name} changed; FTMANIFEST_UPDATE_GOLDEN=1 if intended"


def test_one_signature(tmp_path: Path) -> None:
    manifest = tmp_path / "exp.yaml"
    sign_manifest(manifest, CANONICAL, KEY_A)
    _check("exp.yaml.sig.json", envelope_path_for(manifest).read_bytes())


def test_two_signatures_and_a_non_ascii_name(tmp_path: Path) -> None:
    manifest = tmp_path / "ä b.yaml"
    sign_manifest(manifest, CANONICAL, KEY_A)
    sign_manifest(manifest, CANONICAL, KEY_B)
    _check("two-signers.sig.json", envelope_path_for(manifest).read_bytes())
