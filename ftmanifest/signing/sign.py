"""Sign a manifest: create or extend its DSSE envelope ``M.sig.json``.

Layer: signing (edge: writes the envelope atomically).  Takes the canonical
manifest dict, so it never depends on how the manifest file was formatted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ftmanifest.fsutil import atomic_write_bytes as write_atomic
from ftmanifest.signing._files import ENVELOPE_MAX_BYTES
from ftmanifest.signing.attest import cosign, sign_statement
from ftmanifest.signing.dsse import parse_envelope
from ftmanifest.signing.errors import MalformedEnvelopeError, StaleEnvelopeError
from ftmanifest.signing.keys import PrivateKey, write_failed
from ftmanifest.signing.statement import PREDICATE_TYPE, manifest_subject
from ftmanifest.untrusted import read_untrusted

ENVELOPE_SUFFIX = ".sig.json"
SignStatus = Literal["created", "appended", "already-signed", "replaced"]


def envelope_path_for(manifest_path: Path) -> Path:
    """``exp.yaml`` -> ``exp.yaml.sig.json`` in the same folder."""
    return manifest_path.with_name(manifest_path.name + ENVELOPE_SUFFIX)


@dataclass(frozen=True)
class SignResult:
    envelope_path: Path
    keyid: str
    status: SignStatus
    signatures: int


def sign_manifest(
    manifest_path: Path,
    canonical: dict[str, Any],
    key: PrivateKey,
    *,
    replace: bool = False,
) -> SignResult:
    """Sign ``canonical`` (the manifest at ``manifest_path``) with ``key``.

    An existing envelope over the same payload gets this signature appended
    (author, then reviewer); one over a different payload is refused unless
    ``replace`` starts a new envelope.
    """
    subject = manifest_subject(manifest_path.name, canonical)
    envelope = sign_statement([subject], PREDICATE_TYPE, canonical, key)
    keyid = envelope.signatures[0].keyid
    target = envelope_path_for(manifest_path)
    status: SignStatus = "created"
    if target.exists():
        if replace and not target.is_dir():
            status = "replaced"
        else:
            hint = "inspect it, then start a new envelope with --replace"
            try:  # a folder or FIFO at the envelope path is refused here, exit 2
                data = read_untrusted(
                    target, limit=ENVELOPE_MAX_BYTES, what="signature envelope", hint=hint
                )
                old = parse_envelope(data, str(target))
            except MalformedEnvelopeError as exc:
                exc.hint = "inspect it, then start a new envelope with --replace"
                raise
            if old.payload != envelope.payload:
                raise StaleEnvelopeError(
                    "the existing envelope signs a different version of this manifest",
                    path=str(target),
                    expected="the signatures in the envelope to cover the manifest as it is now",
                    observed=f"{len(old.signatures)} signature(s) over an older payload",
                    hint="if the change is intended, start a new envelope: "
                    "ftmanifest sign M --key K --replace (every signer must sign again)",
                )
            if any(s.keyid == keyid for s in old.signatures):
                return SignResult(target, keyid, "already-signed", len(old.signatures))
            status = "appended"
            envelope = cosign(old, key)
    try:
        write_atomic(target, envelope.to_bytes())
    except OSError as exc:
        raise write_failed(exc, target, "signature envelope") from None
    return SignResult(target, keyid, status, len(envelope.signatures))
