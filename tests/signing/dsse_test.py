"""DSSE envelope: PAE, strict parsing, and an independent re-verification."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from signing_helpers import CANONICAL, NOW, signed, trust_line

from ftmanifest.errors import InputError, RefusedError
from ftmanifest.signing import errors as E
from ftmanifest.signing.dsse import PAYLOAD_TYPE, Envelope, Signature, pae, parse_envelope
from ftmanifest.signing.sign import envelope_path_for
from ftmanifest.signing.verify import verify_manifest_signature


def hand_pae(payload_type: str, body: bytes) -> bytes:
    """PAE written out from the DSSE v1 protocol text, independently of dsse.pae."""
    t = payload_type.encode("utf-8")
    return b"".join(
        [b"DSSEv1", b" ", str(len(t)).encode("ascii"), b" ", t, b" "]
        + [str(len(body)).encode("ascii"), b" ", body]
    )


def test_pae_matches_spec_example_and_counts_utf8_bytes() -> None:
    # Test vector from the DSSE protocol document.
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    body = "héllo €".encode()
    assert len(body) == 10 and len("héllo €") == 7
    assert pae("tÿpe", body) == b"DSSEv1 5 t\xc3\xbfpe 10 " + body
    assert pae("tÿpe", body) == hand_pae("tÿpe", body)


def test_envelope_verifies_by_an_independent_code_path(tmp_path) -> None:
    key = Ed25519PrivateKey.generate()
    manifest = signed(tmp_path, [key], [trust_line(key)])
    raw = json.loads(envelope_path_for(manifest).read_text())
    assert set(raw) == {"payloadType", "payload", "signatures"}
    assert raw["payloadType"] == "application/vnd.in-toto+json"
    body = base64.b64decode(raw["payload"])
    sig = base64.b64decode(raw["signatures"][0]["sig"])
    public: Ed25519PublicKey = key.public_key()
    public.verify(sig, hand_pae(raw["payloadType"], body))  # raises if wrong
    # keyid is the OpenSSH fingerprint: SHA256 over the wire blob, unpadded base64.
    from cryptography.hazmat.primitives import serialization

    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    blob = base64.b64decode(line.split()[1])
    fp = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    assert raw["signatures"][0]["keyid"] == fp
    statement = json.loads(body)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://ftmanifest.dev/experiment/v1"
    assert statement["predicate"] == CANONICAL
    canon = json.dumps(CANONICAL, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert statement["subject"] == [
        {"name": "exp.yaml", "digest": {"sha256": hashlib.sha256(canon.encode()).hexdigest()}}
    ]


KEYID = "SHA256:" + "x" * 42 + "w"  # a well-formed fingerprint of no key


def _envelope() -> Envelope:
    return Envelope(PAYLOAD_TYPE, b'{"a":1}', (Signature(KEYID, bytes(64)),))


def test_round_trip_is_byte_exact() -> None:
    env = _envelope()
    assert parse_envelope(env.to_bytes(), "e") == env


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.replace(b'"payload"', b'"payload":"eyJhIjoxfQ==","payload"', 1), "duplicate"),
        (lambda d: d.replace(b"{", b'{"extra":1,', 1), "unknown fields ['extra']"),
        (lambda d: d.replace(b"eyJhIjoxfQ==", b"eyJhIjoxfQ"), "base64"),
        (lambda d: d.replace(b"eyJhIjoxfQ==", b"eyJhIjoxfR=="), "canonical base64"),
        (lambda d: d.replace(b"eyJhIjoxfQ==", b"eyJh Ijox"), "base64"),
        (lambda d: d.replace(b",", b", ", 1), "canonical form"),
        (lambda d: d.rstrip(b"\n"), "canonical form"),
        (lambda d: d.replace(KEYID.encode(), b""), "keyid"),
        (lambda d: d.replace(b"AAAAAAAA", b"", 1), "bytes, an Ed25519 signature is 64"),
        (lambda d: b"\xff" + d, "UTF-8"),
        (lambda d: b"[]", "not an object"),
        (lambda d: d.replace(b"[{", b"[NaN,{"), "NaN"),
    ],
)
def test_strict_parser_refuses(mutate, needle) -> None:
    with pytest.raises(E.MalformedEnvelopeError) as info:
        parse_envelope(mutate(_envelope().to_bytes()), "env.json")
    assert needle in info.value.message
    assert isinstance(info.value, InputError) and info.value.exit_code == 2
    assert info.value.to_dict()["reason"] == "malformed-envelope"


def test_wrong_payload_type_is_its_own_refusal() -> None:
    data = _envelope().to_bytes().replace(b"in-toto", b"in-totO")
    with pytest.raises(E.WrongPayloadTypeError) as info:
        parse_envelope(data, "env.json")
    assert isinstance(info.value, RefusedError) and info.value.exit_code == 1
    assert info.value.observed == "application/vnd.in-totO+json"


def test_every_single_byte_flip_of_payload_signature_or_type_is_refused(tmp_path) -> None:
    """Flip each byte of the decoded payload, signature and payloadType in turn."""
    key = Ed25519PrivateKey.generate()
    manifest = signed(tmp_path, [key], [trust_line(key)])
    path = envelope_path_for(manifest)
    env = parse_envelope(path.read_bytes(), str(path))
    sig = env.signatures[0]

    def check(mutated: Envelope, expected: type[Exception]) -> None:
        path.write_bytes(mutated.to_bytes())
        with pytest.raises(expected):
            verify_manifest_signature(manifest, CANONICAL, now=NOW)

    payload = bytearray(env.payload)
    for i in range(len(payload)):
        payload[i] ^= 0x01
        check(Envelope(env.payload_type, bytes(payload), env.signatures), E.BadSignatureError)
        payload[i] ^= 0x01
    for i in range(64):
        s = bytearray(sig.sig)
        s[i] ^= 0x80
        bad = Envelope(env.payload_type, env.payload, (Signature(sig.keyid, bytes(s)),))
        check(bad, E.BadSignatureError)
    for i in range(len(PAYLOAD_TYPE)):
        t = bytearray(PAYLOAD_TYPE.encode())
        t[i] ^= 0x01
        bad = Envelope(t.decode("latin-1"), env.payload, env.signatures)
        check(bad, E.WrongPayloadTypeError)
    path.write_bytes(env.to_bytes())
    assert verify_manifest_signature(manifest, CANONICAL, now=NOW).valid_keyids == (sig.keyid,)


def test_statement_payload_is_the_canonical_json_of_the_statement() -> None:
    from ftmanifest.manifest.canonical import canonical_json
    from ftmanifest.signing.statement import build_statement, statement_payload

    for canonical in (CANONICAL, {}, {"zz": [1.5, "ü"], "_a": None, "predicate": {"x": 1}}):
        expected = canonical_json(build_statement("ä b.yaml", canonical))
        assert statement_payload("ä b.yaml", canonical) == expected
