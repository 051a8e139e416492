"""The generic statement signer: any subjects, any predicate type, one trust path."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from signing_helpers import CANONICAL, NOW, trust_line

from ftmanifest.errors import FtManifestError
from ftmanifest.hashing.files import hash_file
from ftmanifest.signing import errors as E
from ftmanifest.signing.attest import cosign, sign_statement, verify_statement
from ftmanifest.signing.dsse import Envelope
from ftmanifest.signing.intoto import Subject
from ftmanifest.signing.keys import fingerprint
from ftmanifest.signing.sign import envelope_path_for, sign_manifest
from ftmanifest.signing.statement import PREDICATE_TYPE, manifest_subject
from ftmanifest.signing.trust import TrustStore, parse_trust

BINDING = "https://ftmanifest.dev/adapter-binding/v1"
ALICE = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
BOB = Ed25519PrivateKey.from_private_bytes(bytes(range(33, 65)))
MALLORY = Ed25519PrivateKey.from_private_bytes(bytes(range(65, 97)))
PREDICATE: dict[str, Any] = {
    "base": {"repo": "org/tiny", "revision": "0" * 40},
    "adapter": {"rank": 8, "target_modules": ["q_proj", "v_proj"]},
}


def _trust(*keys: Ed25519PrivateKey) -> TrustStore:
    names = ("alice@example.org", "bob@example.org", "carol@example.org")
    lines = [trust_line(k, names[i]) for i, k in enumerate(keys)]
    return parse_trust("\n".join(lines) + "\n", Path("allowed_signers"))


def _files(folder: Path) -> tuple[Subject, Subject]:
    """Two real files and their sha256 subjects, as ``hashing`` digests them."""
    weights = folder / "adapter_model.safetensors"
    config = folder / "adapter_config.json"
    weights.write_bytes(bytes(range(256)) * 64)
    config.write_text(json.dumps({"r": 8, "lora_alpha": 16}), encoding="utf-8")
    return tuple(  # type: ignore[return-value]
        Subject.from_digest(p.name, hash_file(p, use_cache=False).digest) for p in (weights, config)
    )


def _verify(data: bytes, trust: TrustStore, **kw: Any):
    kw.setdefault("expected_predicate_type", BINDING)
    return verify_statement(data, trust=trust, now=NOW, path="binding.sig.json", **kw)


def _refused(error: type[FtManifestError], data: bytes, trust: TrustStore, **kw: Any):
    with pytest.raises(error) as info:
        _verify(data, trust, **kw)
    exc = info.value
    assert type(exc) is error
    assert exc.to_dict()["reason"] == error.reason  # type: ignore[attr-defined]
    assert exc.path and exc.expected and exc.observed and exc.hint
    return exc


def test_two_file_subjects_round_trip(tmp_path: Path) -> None:
    weights, config = _files(tmp_path)
    envelope = cosign(sign_statement([weights, config], BINDING, PREDICATE, ALICE), BOB)
    verified = _verify(envelope.to_bytes(), _trust(ALICE, BOB), threshold=2)
    assert verified.subjects == (weights, config)
    assert verified.predicate_type == BINDING
    assert verified.predicate == PREDICATE
    assert verified.verdict.valid_keyids == (
        fingerprint(ALICE.public_key()),
        fingerprint(BOB.public_key()),
    )
    assert verified.verdict.threshold == 2
    assert [c.status for c in verified.verdict.signatures] == ["valid", "valid"]
    # The caller compares what was signed with its files as they are now.
    path = tmp_path / "adapter_model.safetensors"
    signed = verified.statement.digest_of(path.name)
    assert signed == hash_file(path, use_cache=False).digest
    path.write_bytes(b"swapped")
    assert signed != hash_file(path, use_cache=False).digest
    assert verified.statement.digest_of("absent.bin") is None


def test_same_inputs_same_bytes_and_cosign_is_idempotent(tmp_path: Path) -> None:
    subjects = _files(tmp_path)
    first = sign_statement(subjects, BINDING, PREDICATE, ALICE)
    assert first.to_bytes() == sign_statement(subjects, BINDING, PREDICATE, ALICE).to_bytes()
    assert cosign(first, ALICE) == first


def test_the_manifest_signature_is_a_client(tmp_path: Path) -> None:
    manifest = tmp_path / "exp.yaml"
    sign_manifest(manifest, CANONICAL, ALICE)
    envelope = sign_statement(
        [manifest_subject("exp.yaml", CANONICAL)], PREDICATE_TYPE, CANONICAL, ALICE
    )
    assert envelope.to_bytes() == envelope_path_for(manifest).read_bytes()
    verified = _verify(envelope.to_bytes(), _trust(ALICE), expected_predicate_type=PREDICATE_TYPE)
    assert verified.predicate == CANONICAL


def _resigned_payload(envelope: Envelope, edit) -> bytes:
    """The envelope with its payload edited and the old signatures kept."""
    doc = json.loads(envelope.payload)
    edit(doc)
    payload = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return Envelope(envelope.payload_type, payload, envelope.signatures).to_bytes()


def _swap_digest(doc: dict) -> None:
    doc["subject"][1]["digest"]["sha256"] = "0" * 64


def _edit_predicate(doc: dict) -> None:
    doc["predicate"]["adapter"]["rank"] = 64


def _edit_type(doc: dict) -> None:
    doc["predicateType"] = PREDICATE_TYPE


def _drop_subject(doc: dict) -> None:
    del doc["subject"][0]


@pytest.mark.parametrize("edit", [_swap_digest, _edit_predicate, _edit_type, _drop_subject])
def test_tampered_statement_is_a_bad_signature(tmp_path: Path, edit) -> None:
    envelope = sign_statement(_files(tmp_path), BINDING, PREDICATE, ALICE)
    exc = _refused(E.BadSignatureError, _resigned_payload(envelope, edit), _trust(ALICE))
    assert exc.exit_code == 1 and exc.field == "signatures[0]"


def test_unknown_key(tmp_path: Path) -> None:
    envelope = sign_statement(_files(tmp_path), BINDING, PREDICATE, MALLORY)
    exc = _refused(E.UnknownKeyError, envelope.to_bytes(), _trust(ALICE))
    assert fingerprint(MALLORY.public_key()) in exc.message and exc.exit_code == 1


def test_threshold_not_met_counts_distinct_keys(tmp_path: Path) -> None:
    envelope = cosign(sign_statement(_files(tmp_path), BINDING, PREDICATE, ALICE), MALLORY)
    exc = _refused(E.ThresholdNotMetError, envelope.to_bytes(), _trust(ALICE, BOB), threshold=2)
    assert "1 distinct trusted key(s) signed, 2 required" in exc.message


def test_wrong_expected_predicate_type(tmp_path: Path) -> None:
    manifest_envelope = sign_statement(
        [manifest_subject("exp.yaml", CANONICAL)], PREDICATE_TYPE, CANONICAL, ALICE
    )
    exc = _refused(E.WrongPredicateTypeError, manifest_envelope.to_bytes(), _trust(ALICE))
    assert exc.expected == BINDING and exc.observed == PREDICATE_TYPE and exc.exit_code == 2
    # None accepts any type (listing tools); the caller then reads it.
    assert _verify(manifest_envelope.to_bytes(), _trust(ALICE), expected_predicate_type=None)


def test_subject_count_is_checked_after_the_signatures(tmp_path: Path) -> None:
    data = sign_statement(_files(tmp_path), BINDING, PREDICATE, ALICE).to_bytes()
    with pytest.raises(E.MalformedPayloadError, match="exactly one entry"):
        _verify(data, _trust(ALICE), subject_count=1)
    assert _verify(data, _trust(ALICE), subject_count=2)
    # An untrusted signer never gets its payload parsed: the trust refusal comes first.
    with pytest.raises(E.UnknownKeyError):
        _verify(data, _trust(BOB), subject_count=1)


def _raw(payload: bytes, key: Ed25519PrivateKey = ALICE) -> bytes:
    from ftmanifest.signing.attest import sign_payload
    from ftmanifest.signing.dsse import PAYLOAD_TYPE

    return Envelope(PAYLOAD_TYPE, payload, (sign_payload(payload, key),)).to_bytes()


@pytest.mark.parametrize(
    ("subject", "needle"),
    [
        ([{"name": "a", "digest": {"md5": "0" * 32}}], "algorithm 'md5'"),
        ([{"name": "a", "digest": {"sha256": "A" * 64}}], "64 lowercase hex"),
        ([{"name": "a", "digest": {}}], "non-empty object"),
        ([{"name": "", "digest": {"sha256": "0" * 64}}], "non-empty string"),
        ([{"name": "a", "digest": {"sha256": "0" * 64}}] * 2, "repeats 'a'"),
        ([], "non-empty list"),
    ],
)
def test_signed_but_unacceptable_subjects(subject, needle) -> None:
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": subject,
        "predicateType": BINDING,
        "predicate": {},
    }
    data = _raw(json.dumps(statement).encode())
    with pytest.raises(E.MalformedPayloadError, match=needle) as info:
        _verify(data, _trust(ALICE))
    assert info.value.reason == "malformed-payload" and info.value.exit_code == 2


@pytest.mark.parametrize(
    "subjects",
    [
        [],
        [Subject("a", {"sha256": "0" * 64}), Subject("a", {"sha256": "1" * 64})],
    ],
)
def test_signing_refuses_caller_bugs(subjects) -> None:
    with pytest.raises(ValueError):
        sign_statement(subjects, BINDING, PREDICATE, ALICE)


def test_subject_refuses_unknown_algorithms_and_bare_hex() -> None:
    with pytest.raises(ValueError, match="md5"):
        Subject("a", {"md5": "0" * 32})
    with pytest.raises(ValueError, match="algorithm"):
        Subject.from_digest("a", "0" * 64)


def test_threshold_below_one_and_oversized_envelopes_are_refused(tmp_path: Path) -> None:
    data = sign_statement(_files(tmp_path), BINDING, PREDICATE, ALICE).to_bytes()
    with pytest.raises(FtManifestError, match="at least 1"):
        _verify(data, _trust(ALICE), threshold=0)
    big = b" " * (1 << 20) + data
    assert _refused(E.FileTooLargeError, big, _trust(ALICE)).exit_code == 2


# --- mutate-then-verify --------------------------------------------------------

_ORIGINAL = sign_statement(
    [Subject("a.bin", {"sha256": "1" * 64}), Subject("b.json", {"sha256": "2" * 64})],
    BINDING,
    PREDICATE,
    ALICE,
).to_bytes()
_TRUST = _trust(ALICE)
mutation = st.tuples(
    st.sampled_from(["flip", "insert", "delete"]),
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=1, max_value=255),
)


def test_fuzz_baseline_verifies() -> None:
    assert _verify(_ORIGINAL, _TRUST).verdict.valid_keyids


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_statement_envelope_never_verifies(ops) -> None:
    data = bytearray(_ORIGINAL)
    for kind, pos, byte in ops:
        if kind == "flip" and data:
            data[pos % len(data)] ^= byte
        elif kind == "insert":
            data.insert(pos % (len(data) + 1), byte)
        elif kind == "delete" and data:
            del data[pos % len(data)]
    if bytes(data) == _ORIGINAL:
        return
    with pytest.raises(FtManifestError):
        _verify(bytes(data), _TRUST)


@settings(max_examples=100, deadline=None)
@given(index=st.integers(min_value=0, max_value=10**6), byte=st.integers(1, 255))
def test_mutated_payload_never_verifies(index: int, byte: int) -> None:
    """A change inside the decoded payload (re-encoded canonically) is a bad signature."""
    doc = json.loads(_ORIGINAL)
    payload = bytearray(base64.b64decode(doc["payload"]))
    payload[index % len(payload)] ^= byte
    doc["payload"] = base64.b64encode(bytes(payload)).decode()
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    with pytest.raises(E.BadSignatureError):
        _verify(data, _TRUST)
