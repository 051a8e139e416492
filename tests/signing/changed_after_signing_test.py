"""A manifest edited after signing: the refusal names each changed field with its
signed and its current value, but only when a trusted signature vouches for the
signed values; otherwise it says why it shows none."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signing_helpers import CANONICAL, NOW, signed, trust_line

from ftmanifest.manifest.diff import Change
from ftmanifest.signing import errors as E
from ftmanifest.signing.dsse import parse_envelope
from ftmanifest.signing.sign import envelope_path_for
from ftmanifest.signing.statement import statement_payload
from ftmanifest.signing.verify import verify_manifest_signature

ALICE = Ed25519PrivateKey.generate()
MALLORY = Ed25519PrivateKey.generate()
LURE = 9.75  # a value only an unverified payload holds


def _edited(**training: Any) -> dict[str, Any]:
    data = copy.deepcopy(CANONICAL)
    data["training"].update(training)
    return data


def _refusal(manifest: Path, canonical: dict[str, Any]) -> E.SignatureRefusedError:
    with pytest.raises(E.SignatureRefusedError) as info:
        verify_manifest_signature(manifest, canonical, now=NOW)
    return info.value


def _everything(exc: E.SignatureRefusedError) -> str:
    return json.dumps(exc.to_dict()) + exc.message


def test_an_edited_value_is_named_with_its_signed_and_its_current_value(
    tmp_path: Path,
) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE)])
    exc = _refusal(manifest, _edited(lr=0.0003))
    assert isinstance(exc, E.ManifestChangedError)
    assert "training.lr: signed 0.0002, now 0.0003" in exc.message
    assert exc.changes == (Change("training.lr", "changed", 0.0002, 0.0003),)
    assert exc.field == "training.lr"
    assert exc.expected is not None and "(as signed)" in exc.expected  # the digests stay


def test_added_and_removed_fields_say_absent(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE)])
    data = _edited(warmup=50)
    del data["training"]["rank"]
    exc = _refusal(manifest, data)
    assert "training.rank: signed 16, now (absent)" in exc.message
    assert "training.warmup: signed (absent), now 50" in exc.message


def test_many_changes_are_counted_in_the_message_and_all_carried(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE)])
    data = _edited(**{f"extra{i:02d}": i for i in range(12)})
    exc = _refusal(manifest, data)
    assert isinstance(exc, E.ManifestChangedError)
    assert len(exc.changes) == 12 and "and 4 more" in exc.message


def test_the_manifest_as_signed_verifies(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE)])
    report = verify_manifest_signature(manifest, CANONICAL, now=NOW)
    assert len(report.valid_keyids) == 1


def test_an_untrusted_signers_values_are_never_shown(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [MALLORY], [trust_line(ALICE)], canonical=_edited(lr=LURE))
    exc = _refusal(manifest, _edited(lr=0.0003))
    assert isinstance(exc, E.UnknownKeyError)
    assert "not shown" in exc.message and "no trusted signature" in exc.message
    assert exc.payload_unvouched
    assert str(LURE) not in _everything(exc)


def test_an_untrusted_signature_over_this_very_manifest_adds_no_note(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [MALLORY], [trust_line(ALICE)])
    exc = _refusal(manifest, CANONICAL)
    assert isinstance(exc, E.UnknownKeyError)
    assert "not shown" not in exc.message and not exc.payload_unvouched


def test_a_forged_payload_under_a_real_signature_shows_no_values(tmp_path: Path) -> None:
    manifest = signed(tmp_path, [ALICE], [trust_line(ALICE)])
    path = envelope_path_for(manifest)
    envelope = parse_envelope(path.read_bytes(), str(path))
    forged = statement_payload(manifest.name, _edited(lr=LURE))
    path.write_bytes(replace(envelope, payload=forged).to_bytes())
    exc = _refusal(manifest, _edited(lr=0.0003))
    assert isinstance(exc, E.BadSignatureError)
    assert "not shown" in exc.message
    assert str(LURE) not in _everything(exc)
