"""Signed manifests: DSSE envelopes, Ed25519 keys, allowed-signers trust.

Layer: signing (above the probes, below every judging room).  Thin public API;
names load lazily so importing ``ftmanifest.signing.errors`` stays cheap.

    verify_manifest_signature(manifest_path, canonical, *, trust_path=None,
                              threshold=1, now=None) -> SignatureReport
    sign_manifest(manifest_path, canonical, key, *, replace=False) -> SignResult
    load_private_key(path, passphrase=None) -> Ed25519PrivateKey
    generate_key_pair(path, *, comment="", passphrase=None) -> fingerprint

Any other statement (adapter binding, backup index, preflight record, ledger
entry) goes through the same generic calls (``attest``):

    sign_statement(subjects, predicate_type, predicate, key) -> Envelope
    cosign(envelope, key) -> Envelope
    verify_statement(envelope_bytes, *, trust, threshold=1,
                     expected_predicate_type=None, ...) -> VerifiedStatement
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the lazy names below, typed for checkers
    from ftmanifest.signing._files import ENVELOPE_MAX_BYTES as ENVELOPE_MAX_BYTES
    from ftmanifest.signing._ssh_line import KEY_TYPES as KEY_TYPES
    from ftmanifest.signing._strict import StrictJSONError as StrictJSONError
    from ftmanifest.signing._strict import loads_strict as loads_strict

_EXPORTS = {
    "verify_manifest_signature": "verify",
    "inspect_signatures": "verify",
    "SignatureReport": "verify",
    "SignatureCheck": "judge",
    "sign_statement": "attest",
    "cosign": "attest",
    "verify_statement": "attest",
    "VerifiedStatement": "attest",
    "SignatureVerdict": "attest",
    "Subject": "intoto",
    "Statement": "intoto",
    "sign_manifest": "sign",
    "SignResult": "sign",
    "envelope_path_for": "sign",
    "load_private_key": "keys",
    "generate_key_pair": "keys",
    "fingerprint": "keys",
    "find_trust_file": "locate",
    "choose_trust_file": "locate",
    "TrustSource": "locate",
    "load_trust": "trust",
    # what other rooms read envelopes and keys with
    "ENVELOPE_MAX_BYTES": "_files",
    "KEY_TYPES": "_ssh_line",
    "StrictJSONError": "_strict",
    "loads_strict": "_strict",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ftmanifest.signing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ftmanifest.signing.{module}"), name)
