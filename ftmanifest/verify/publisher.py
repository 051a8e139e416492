"""Is the publisher who signed the model (``model.sig``) still trusted?

Layer: judging rooms - verify.  ``lock`` verified ``model.sig`` with model-signing and
recorded who signed it (``model.publisher_signature``); every file of the model,
``model.sig`` among them, is pinned by digest, so ``compare`` already refuses a changed
file or a replaced signature.  What the pins cannot see is the trust decision: a
publisher key taken out of the trust file (or past its ``valid-before``) after lock.
This check reads the trust file again and needs no model-signing and no second hash
of the model: the bytes are those lock verified, only the trust is judged anew.
``verify``, ``run`` and the Trainer guard all get the row through ``verify_manifest``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from ftmanifest.manifest.environment import PublisherSignature
from ftmanifest.signing.judge import now_or
from ftmanifest.signing.keys import ECDSA_KEY_TYPE
from ftmanifest.signing.locate import choose_trust_file
from ftmanifest.signing.trust import STATUS_OK, X509_CA_NAMESPACE, TrustedKey, load_trust

RULE = "drift.publisher-untrusted"
LOC = ("model", "publisher_signature", "key")


def publisher_rows(
    record: PublisherSignature | None,
    manifest_path: Path,
    trust_path: Path | None = None,
    *,
    now: datetime | None = None,
) -> list[Finding]:
    """One error row when the key (or CA) that vouched for ``model.sig`` at lock is
    not trusted now; none when nothing is recorded or the trust still holds."""
    if record is None:
        return []
    try:
        trust = load_trust(choose_trust_file(manifest_path, trust_path).path)
    except FtManifestError as exc:  # no trust file, or one that cannot be read
        return [_row(record, manifest_path, f"the trust file cannot be read: {exc.message}")]
    when = now_or(now)
    certificate = record.method == "certificate"
    entries = trust.authorities if certificate else trust.keys
    mine = [e for e in entries if e.fingerprint == record.key]
    if any(_usable(e, when, certificate=certificate) for e in mine):
        return []
    if not mine:
        observed = f"{record.key} is no longer in {trust.path}"
    else:
        namespace = X509_CA_NAMESPACE if certificate else None
        states = sorted({e.status(when, namespace) if namespace else e.status(when) for e in mine})
        observed = f"{record.key} in {trust.path} (line {mine[0].line}): {', '.join(states)}"
    return [_row(record, manifest_path, observed)]


def _usable(entry: TrustedKey, when: datetime, *, certificate: bool) -> bool:
    if certificate:
        return entry.status(when, X509_CA_NAMESPACE) == STATUS_OK
    return entry.keytype == ECDSA_KEY_TYPE and entry.status(when) == STATUS_OK


def _row(record: PublisherSignature, manifest_path: Path, observed: str) -> Finding:
    what, pem = ("CA", "CA.pem") if record.method == "certificate" else ("key", "PUB.pem")
    return Finding.at(
        LOC,
        kind="drift",
        rule=RULE,
        message=f"{record.file}: the publisher {what} that signed the model "
        f"({record.signer}) is not trusted now",
        path=str(manifest_path),
        expected=f"{record.key} ({record.signer}) trusted in the trust file, as at lock",
        observed=observed[:300],
        hint=f"do not train on or ship this model until you know why the publisher's {what} "
        f"was withdrawn; if the publisher signed again with a new {what}, get their new "
        f"{record.file}, trust the new {what} (ftmanifest trust add {pem} --principal NAME) "
        "and lock again",
    )
