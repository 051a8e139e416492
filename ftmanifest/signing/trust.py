"""Trusted signers: the OpenSSH ``allowed_signers`` file format.

Layer: signing (reads the trust file; judging is pure).  Parsed as OpenSSH
9.x parses it (sshsig.c ``parse_principals_key_and_options`` and
``sshsigopt_parse``; ``man ssh-keygen``, ALLOWED SIGNERS):
``principals [options] keytype base64-key [comment]``.  Principals may be
quoted; options are ``cert-authority``, ``namespaces="..."``,
``valid-after="..."`` and ``valid-before="..."``, values always quoted,
each at most once; the comment is never parsed (a ``"`` in it is fine);
patterns know only ``*``, ``?`` and ``!``.  Deviations, all toward refusing: a
malformed line anywhere makes the whole file malformed (ssh stops at it only
when it reaches it); a line without a ``namespaces`` option does not count
for ftmanifest (ssh would allow every namespace); certificate authorities and
keys other than Ed25519 and ECDSA P-256 are skipped with a warning, except a
``cert-authority`` line for the namespace ``x509-ca@ftmanifest`` alone: the
key of an X.509 CA trusted for certificate-signed ``model.sig`` (``x509_ca``),
kept apart in ``TrustStore.authorities``, never a manifest signer;
small-order Ed25519 keys and off-curve ECDSA points are refused.
Which file is used, and why, is ``locate``'s business.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ftmanifest.signing._files import TRUST_MAX_BYTES
from ftmanifest.signing._ssh_line import match_list, parse_allowed_line
from ftmanifest.signing.errors import (
    MalformedTrustFileError,
    SigningInputError,
    TrustFileNotFoundError,
    WeakKeyError,
)
from ftmanifest.signing.keys import (
    SIGNING_KEY_TYPES,
    PublicKey,
    fingerprint_of_blob,
    public_key_from_blob,
)
from ftmanifest.signing.locate import DEFAULT_TRUST, find_trust_file
from ftmanifest.untrusted import read_untrusted

__all__ = ["DEFAULT_TRUST", "find_trust_file", "load_trust", "parse_trust"]

NAMESPACE = "ftmanifest"
X509_CA_NAMESPACE = "x509-ca@ftmanifest"

STATUS_OK = "valid"
STATUS_WRONG_NAMESPACE = "wrong-namespace"
STATUS_EXPIRED = "expired-key"
STATUS_NOT_YET_VALID = "not-yet-valid"


@dataclass(frozen=True)
class TrustedKey:
    principals: tuple[str, ...]
    blob: bytes
    fingerprint: str
    namespaces: tuple[str, ...] | None
    valid_after: int | None
    """Seconds since the epoch (ssh semantics: valid from this second on)."""
    valid_before: int | None
    """Seconds since the epoch (valid up to and including this second)."""
    line: int
    keytype: str = "ssh-ed25519"
    """``ssh-ed25519`` or ``ecdsa-sha2-nistp256``."""
    cert_authority: bool = False
    """A ``cert-authority`` line (kept only for ``x509-ca@ftmanifest``)."""

    def public_key(self) -> PublicKey:
        return public_key_from_blob(self.blob)

    def matches_principal(self, name: str) -> bool:
        return match_list(name, self.principals)

    def status(self, now: datetime, namespace: str = NAMESPACE) -> str:
        if self.namespaces is None or not match_list(namespace, self.namespaces):
            return STATUS_WRONG_NAMESPACE
        seconds = now.timestamp() if now.tzinfo is not None else now.astimezone().timestamp()
        if self.valid_after is not None and seconds < self.valid_after:
            return STATUS_NOT_YET_VALID
        if self.valid_before is not None and seconds > self.valid_before:
            return STATUS_EXPIRED
        return STATUS_OK


@dataclass(frozen=True)
class TrustStore:
    path: Path
    keys: tuple[TrustedKey, ...]
    warnings: tuple[str, ...] = field(default=())
    authorities: tuple[TrustedKey, ...] = field(default=())
    """``cert-authority`` lines for ``x509-ca@ftmanifest``: X.509 CA keys."""

    def by_fingerprint(self, fp: str) -> tuple[TrustedKey, ...]:
        return tuple(k for k in self.keys if k.fingerprint == fp)


def _parse_line(text: str, lineno: int, warnings: list[str], path: Path) -> TrustedKey | None:
    parsed = parse_allowed_line(text)
    if parsed.cert_authority and parsed.namespaces != (X509_CA_NAMESPACE,):
        warnings.append(f"{path}:{lineno}: cert-authority lines are not supported; skipped")
        return None
    if parsed.keytype not in SIGNING_KEY_TYPES:
        warnings.append(
            f"{path}:{lineno}: {parsed.keytype} keys are not supported "
            "(Ed25519 and ECDSA P-256 only)"
        )
        return None
    public_key_from_blob(parsed.blob)  # validate now (incl. small order), not when verifying
    if not parsed.blob.startswith(struct.pack(">I", len(parsed.keytype)) + parsed.keytype.encode()):
        raise ValueError(f"the key is not of the type the line names ({parsed.keytype})")
    return TrustedKey(
        principals=parsed.principals,
        blob=parsed.blob,
        fingerprint=fingerprint_of_blob(parsed.blob),
        namespaces=parsed.namespaces,
        valid_after=parsed.valid_after,
        valid_before=parsed.valid_before,
        line=lineno,
        keytype=parsed.keytype,
        cert_authority=parsed.cert_authority,
    )


def parse_trust(text: str, path: Path) -> TrustStore:
    keys: list[TrustedKey] = []
    authorities: list[TrustedKey] = []
    warnings: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip(" \t\r\n")
        if not line or line.startswith("#"):
            continue
        try:
            key = _parse_line(line, lineno, warnings, path)
        except WeakKeyError as exc:
            exc.path, exc.line = str(path), lineno
            raise
        except (ValueError, SigningInputError) as exc:
            what = exc.message if isinstance(exc, SigningInputError) else str(exc)
            raise MalformedTrustFileError(
                f"trust file line is malformed: {what}",
                path=str(path),
                line=lineno,
                expected='principals [namespaces="ftmanifest",valid-after="..."] ssh-ed25519 KEY',
                observed=line[:120],
                hint="fix or delete the line (see `man ssh-keygen`, ALLOWED SIGNERS)",
            ) from None
        if key is not None and key.cert_authority:
            authorities.append(key)
        elif key is not None:
            keys.append(key)
    return TrustStore(
        path=path, keys=tuple(keys), warnings=tuple(warnings), authorities=tuple(authorities)
    )


def load_trust(path: Path) -> TrustStore:
    """Parse the trust file at ``path``: a regular file of at most 1 MiB."""
    try:
        data = read_untrusted(
            path,
            limit=TRUST_MAX_BYTES,
            what="trust file (allowed signers)",
            hint="point --trust (or $FTMANIFEST_TRUST_FILE) at an allowed_signers file",
        )
    except FileNotFoundError:
        raise TrustFileNotFoundError(
            "trust file (allowed signers) not found",
            path=str(path),
            hint="check the --trust path (or $FTMANIFEST_TRUST_FILE), or create the file",
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedTrustFileError(
            "trust file is not UTF-8 text", path=str(path), hint="rewrite it as UTF-8 text"
        ) from None
    return parse_trust(text, path)
