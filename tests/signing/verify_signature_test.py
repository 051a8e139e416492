"""verify_manifest_signature: trust failures, threshold, manifest edits, fuzzing."""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from signing_helpers import CANONICAL, NOW, repo, signed, trust_line

from ftmanifest.errors import FtManifestError
from ftmanifest.signing import errors as E
from ftmanifest.signing.keys import fingerprint
from ftmanifest.signing.sign import envelope_path_for, sign_manifest
from ftmanifest.signing.verify import inspect_signatures, verify_manifest_signature

ALICE = Ed25519PrivateKey.generate()
BOB = Ed25519PrivateKey.generate()
MALLORY = Ed25519PrivateKey.generate()


def verify(manifest: Path, canonical=None, **kw):
    return verify_manifest_signature(manifest, canonical or CANONICAL, now=NOW, **kw)


def refused(manifest: Path, error: type[E.SignatureRefusedError], **kw) -> E.SignatureRefusedError:
    with pytest.raises(error) as info:
        verify(manifest, **kw)
    exc = info.value
    assert type(exc) is error and exc.exit_code == 1
    assert exc.to_dict()["reason"] == error.reason
    assert exc.path and exc.expected and exc.observed and exc.hint  # names file, both sides, fix
    return exc


def test_valid_signature_report(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE)])
    report = verify(manifest)
    assert report.valid_keyids == (fingerprint(ALICE.public_key()),)
    assert report.signatures[0].principals == ("alice@example.org",)
    assert report.trust_path == tmp_path / ".ftmanifest" / "allowed_signers"
    assert report.to_dict()["digest"].startswith("sha256:")


def test_unsigned(tmp_path: Path) -> None:
    manifest = repo(tmp_path, [trust_line(ALICE)])
    exc = refused(manifest, E.UnsignedError)
    assert "ftmanifest sign" in (exc.hint or "")


def test_unknown_key(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [MALLORY], [trust_line(ALICE)])
    exc = refused(manifest, E.UnknownKeyError)
    assert fingerprint(MALLORY.public_key()) in exc.message


def test_revoked_key_by_removing_its_line(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE), trust_line(BOB, "bob@x")])
    verify(manifest)
    repo(tmp_path, [trust_line(BOB, "bob@x")])  # alice's line removed
    refused(manifest, E.UnknownKeyError)


def test_expired_and_not_yet_valid_keys(tmp_path: Path) -> None:
    old = 'namespaces="ftmanifest",valid-before="20250101Z"'
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE, options=old)])
    exc = refused(manifest, E.ExpiredKeyError)
    assert exc.observed == "expired-key"
    repo(tmp_path, [trust_line(ALICE, options='namespaces="ftmanifest",valid-after="20300101Z"')])
    refused(manifest, E.NotYetValidKeyError)
    with pytest.raises(E.NotYetValidKeyError):
        verify_manifest_signature(manifest, CANONICAL, now=NOW - timedelta(days=1))


def test_wrong_namespace(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE, options='namespaces="git"')])
    exc = refused(manifest, E.WrongNamespaceError)
    assert 'namespaces="ftmanifest"' in (exc.hint or "")


def test_threshold_counts_distinct_keys(tmp_path: Path) -> None:
    trusted = [trust_line(ALICE), trust_line(BOB, "bob@x")]
    manifest = signed(tmp_path, [ALICE], trusted)
    refused(manifest, E.ThresholdNotMetError, threshold=2)
    # The same key signing twice (a duplicated signature entry) still counts once.
    path = envelope_path_for(manifest)
    from ftmanifest.signing.dsse import Envelope, parse_envelope

    env = parse_envelope(path.read_bytes(), str(path))
    path.write_bytes(Envelope(env.payload_type, env.payload, env.signatures * 2).to_bytes())
    exc = refused(manifest, E.ThresholdNotMetError, threshold=2)
    assert "1 distinct trusted key(s) signed, 2 required" in exc.message
    # A second key listed under two principals is one key, too.
    repo(tmp_path, [*trusted, trust_line(ALICE, "alias@x")])
    refused(manifest, E.ThresholdNotMetError, threshold=2)
    path.write_bytes(env.to_bytes())
    sign_manifest(manifest, CANONICAL, BOB)
    assert len(verify(manifest, threshold=2).valid_keyids) == 2
    with pytest.raises(FtManifestError):
        verify(manifest, threshold=0)


def test_untrusted_extra_signature_is_listed_but_does_not_count(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE, MALLORY], [trust_line(ALICE)])
    report = verify(manifest)
    assert [c.status for c in report.signatures] == ["valid", "unknown-key"]
    refused(manifest, E.ThresholdNotMetError, threshold=2)


def test_editing_any_value_after_signing_is_refused(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE)])
    edits = {
        ("experiment", "id"): "experiment.id",
        ("training", "lr"): "training.lr",
        ("training", "note"): "training.note",
        ("seeds", 1): "seeds[1]",
    }
    for (section, field), where in edits.items():
        changed = copy.deepcopy(CANONICAL)
        changed[section][field] = "edited"
        exc = refused(manifest, E.ManifestChangedError, canonical=changed)
        assert exc.field == where and where in exc.message
    exc = refused(manifest, E.ManifestChangedError, canonical={**CANONICAL, "new": 1})
    assert exc.field == "new"


def test_renamed_manifest_is_a_payload_mismatch(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE)])
    moved = manifest.with_name("other.yaml")
    envelope_path_for(manifest).rename(envelope_path_for(moved))
    exc = refused(moved, E.PayloadMismatchError)
    assert (exc.expected, exc.observed) == ("other.yaml", "exp.yaml")


def test_inspect_without_trust_file_lists_unchecked(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    sign_manifest(manifest, CANONICAL, ALICE)
    seen = inspect_signatures(manifest)
    trust, checks = seen.trust, seen.checks
    assert (
        trust is None
        and seen.source is None
        and [(c.status, c.verifies) for c in checks] == [("unknown-key", None)]
    )


# --- Hypothesis: mutate the envelope file, verification must never pass -------

FUZZ_DIR: dict[str, Path] = {}


def _fuzz_manifest(tmp_path_factory) -> Path:
    if "m" not in FUZZ_DIR:
        base = tmp_path_factory.mktemp("fuzz")
        FUZZ_DIR["m"] = signed(base, [ALICE], [trust_line(ALICE)])
    return FUZZ_DIR["m"]


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.just(0)),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_envelope_never_verifies(tmp_path_factory, ops) -> None:
    manifest = _fuzz_manifest(tmp_path_factory)
    path = envelope_path_for(manifest)
    original = FUZZ_DIR.setdefault("bytes", path.read_bytes())  # type: ignore[arg-type]
    data = bytearray(original)  # type: ignore[arg-type]
    for kind, pos, byte in ops:
        if kind == "flip" and data:
            data[pos % len(data)] ^= byte
        elif kind == "insert":
            data.insert(pos % (len(data) + 1), byte)
        elif kind == "delete" and data:
            del data[pos % len(data)]
    if bytes(data) == original:
        return
    path.write_bytes(bytes(data))
    try:
        with pytest.raises(FtManifestError) as info:
            verify(manifest)
        assert isinstance(info.value, (E.SignatureRefusedError, E.SigningInputError))
    finally:
        path.write_bytes(original)  # type: ignore[arg-type]


# --- payloads signed by a trusted key but not what ftmanifest signs ----------


def _sign_raw(tmp_path: Path, payload: bytes) -> Path:
    from ftmanifest.signing.dsse import PAYLOAD_TYPE, Envelope, Signature, pae

    manifest = repo(tmp_path, [trust_line(ALICE)])
    keyid = fingerprint(ALICE.public_key())
    sig = Signature(keyid, ALICE.sign(pae(PAYLOAD_TYPE, payload)))
    envelope_path_for(manifest).write_bytes(Envelope(PAYLOAD_TYPE, payload, (sig,)).to_bytes())
    return manifest


def _statement(**override) -> dict:
    from ftmanifest.signing.statement import build_statement

    return {**build_statement("exp.yaml", CANONICAL), **override}


def test_non_canonical_but_equal_payload_is_accepted(tmp_path: Path) -> None:
    import json

    manifest = _sign_raw(tmp_path, json.dumps(_statement(), indent=2).encode())
    assert verify(manifest).valid_keyids


def test_inconsistent_statement_is_a_payload_mismatch(tmp_path: Path) -> None:
    import json

    bad = _statement(subject=[{"name": "exp.yaml", "digest": {"sha256": "0" * 64}}])
    manifest = _sign_raw(tmp_path, json.dumps(bad).encode())
    exc = refused(manifest, E.PayloadMismatchError)
    assert exc.field == "subject[0].digest.sha256"


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (b'{"_type": 1, "_type": 2}', "duplicate key"),
        (b'{"x": NaN}', "NaN"),
        (b'{"x": 1e999}', "overflows"),
        (b"[]", "fields are list"),
        (None, "predicateType"),
        (None, "exactly one entry"),
    ],
)
def test_malformed_signed_payloads(tmp_path: Path, payload, needle) -> None:
    import json

    if payload is None and needle == "predicateType":
        payload = json.dumps(_statement(predicateType="https://example.org/other")).encode()
    elif payload is None:
        two = _statement()["subject"] * 2
        payload = json.dumps(_statement(subject=two)).encode()
    manifest = _sign_raw(tmp_path, payload)
    with pytest.raises(E.MalformedPayloadError, match=needle) as info:
        verify(manifest)
    assert info.value.exit_code == 2
