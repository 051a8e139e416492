"""Trusted signers: the OpenSSH ``allowed_signers`` file format.

Layer: signing (reads the trust file; judging is pure).  Format (see
``man ssh-keygen``, ALLOWED SIGNERS): ``principals [options] keytype
base64-key [comment]`` with options ``namespaces="..."``,
``valid-after="YYYYMMDD[HHMM[SS]][Z]"``, ``valid-before=...`` and
``cert-authority``.  Deviations, all toward refusing: a line without a
``namespaces`` option does not count for ftmanifest (ssh would allow every
namespace); certificate authorities and non-Ed25519 keys are skipped with a
warning.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ftmanifest.signing._strict import b64decode_strict
from ftmanifest.signing.errors import MalformedTrustFileError, TrustFileNotFoundError
from ftmanifest.signing.keys import KEY_TYPE, fingerprint_of_blob, public_key_from_blob

NAMESPACE = "ftmanifest"
DEFAULT_TRUST = Path(".ftmanifest") / "allowed_signers"
_TIME = re.compile(r"(\d{8})(\d{4})?(\d{2})?(Z)?")
_KEY_PREFIXES = ("ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-", "rsa-sha2-")

STATUS_OK = "valid"
STATUS_WRONG_NAMESPACE = "wrong-namespace"
STATUS_EXPIRED = "expired-key"
STATUS_NOT_YET_VALID = "not-yet-valid"


def _match_list(value: str, patterns: tuple[str, ...]) -> bool:
    """OpenSSH pattern-list semantics: any negated match wins, else any match."""
    hit = False
    for pattern in patterns:
        if pattern.startswith("!"):
            if fnmatch.fnmatchcase(value, pattern[1:]):
                return False
        elif fnmatch.fnmatchcase(value, pattern):
            hit = True
    return hit


@dataclass(frozen=True)
class TrustedKey:
    principals: tuple[str, ...]
    blob: bytes
    fingerprint: str
    namespaces: tuple[str, ...] | None
    valid_after: datetime | None
    valid_before: datetime | None
    line: int

    def public_key(self) -> Ed25519PublicKey:
        return public_key_from_blob(self.blob)

    def matches_principal(self, name: str) -> bool:
        return _match_list(name, self.principals)

    def status(self, now: datetime) -> str:
        if self.namespaces is None or not _match_list(NAMESPACE, self.namespaces):
            return STATUS_WRONG_NAMESPACE
        if self.valid_after is not None and now < self.valid_after:
            return STATUS_NOT_YET_VALID
        if self.valid_before is not None and now > self.valid_before:
            return STATUS_EXPIRED
        return STATUS_OK


@dataclass(frozen=True)
class TrustStore:
    path: Path
    keys: tuple[TrustedKey, ...]
    warnings: tuple[str, ...] = field(default=())

    def by_fingerprint(self, fp: str) -> tuple[TrustedKey, ...]:
        return tuple(k for k in self.keys if k.fingerprint == fp)


def find_trust_file(manifest_path: Path) -> Path:
    """Walk up from the manifest's folder to the repository root (the folder
    holding ``.git``) looking for ``.ftmanifest/allowed_signers``.  Outside a
    repository only the manifest's own folder is searched, so a file planted in
    a shared parent such as /tmp is never picked up."""
    start = manifest_path.resolve().parent
    chain = [start, *start.parents]
    root = next((d for d in chain if (d / ".git").exists()), None)
    searched = chain[: chain.index(root) + 1] if root is not None else [start]
    for folder in searched:
        candidate = folder / DEFAULT_TRUST
        if candidate.is_file():
            return candidate
    raise TrustFileNotFoundError(
        "no trust file (allowed signers) found for this manifest",
        path=str(searched[-1] / DEFAULT_TRUST),
        expected=f"{DEFAULT_TRUST} in the manifest's folder or a parent up to the repository root",
        observed="searched: " + ", ".join(str(d) for d in searched),
        hint=f"create {DEFAULT_TRUST} with lines like "
        f'`alice@example.org namespaces="{NAMESPACE}" ssh-ed25519 AAAA...`, or pass --trust PATH',
    )


def _split(text: str, sep: str | None) -> list[str]:
    """Split on ``sep`` (None: whitespace) outside double quotes; quotes kept."""
    parts: list[str] = []
    cur: list[str] = []
    quoted = escaped = False
    for ch in text:
        if escaped:
            cur.append(ch)
            escaped = False
        elif ch == "\\" and quoted:
            cur.append(ch)
            escaped = True
        elif ch == '"':
            cur.append(ch)
            quoted = not quoted
        elif not quoted and (ch == sep or (sep is None and ch in " \t")):
            if cur or sep is not None:
                parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if quoted:
        raise ValueError("unterminated quote")
    if cur or sep is not None:
        parts.append("".join(cur))
    return parts


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('\\"', '"')
    if '"' in text:
        raise ValueError(f"stray quote in {text!r}")
    return text


def _parse_time(text: str) -> datetime:
    m = _TIME.fullmatch(text)
    if not m or (m.group(3) and not m.group(2)):
        raise ValueError(f"time {text!r} is not YYYYMMDD[HHMM[SS]][Z]")
    stamp = m.group(1) + (m.group(2) or "0000") + (m.group(3) or "00")
    naive = datetime.strptime(stamp, "%Y%m%d%H%M%S")
    # Like ssh: a trailing Z means UTC, otherwise the local time zone.
    return naive.replace(tzinfo=timezone.utc) if m.group(4) else naive.astimezone()


def _parse_line(text: str, lineno: int, warnings: list[str], path: Path) -> TrustedKey | None:
    tokens = _split(text, None)
    if len(tokens) < 3:
        raise ValueError("expected `principals [options] keytype base64-key [comment]`")
    principals = tuple(p for p in _unquote(tokens[0]).split(",") if p)
    if not principals:
        raise ValueError("no principals")
    rest = tokens[1:]
    options = ""
    if not rest[0].startswith(_KEY_PREFIXES):
        options, rest = rest[0], rest[1:]
    if len(rest) < 2:
        raise ValueError("missing key type or key")
    keytype, key_b64 = rest[0], rest[1]
    namespaces: tuple[str, ...] | None = None
    after = before = None
    for opt in _split(options, ",") if options else []:
        name, eq, value = opt.partition("=")
        name = name.lower()
        if name == "cert-authority" and not eq:
            warnings.append(f"{path}:{lineno}: cert-authority lines are not supported; skipped")
            return None
        if not eq or name not in ("namespaces", "valid-after", "valid-before"):
            raise ValueError(f"unknown or malformed option {opt!r}")
        value = _unquote(value)
        if name == "namespaces":
            namespaces = tuple(n for n in value.split(",") if n)
        elif name == "valid-after":
            after = _parse_time(value)
        else:
            before = _parse_time(value)
    if keytype != KEY_TYPE:
        warnings.append(f"{path}:{lineno}: {keytype} keys are not supported (Ed25519 only)")
        return None
    blob = b64decode_strict(key_b64)
    public_key_from_blob(blob)  # validate now, not at verification time
    return TrustedKey(
        principals=principals,
        blob=blob,
        fingerprint=fingerprint_of_blob(blob),
        namespaces=namespaces,
        valid_after=after,
        valid_before=before,
        line=lineno,
    )


def parse_trust(text: str, path: Path) -> TrustStore:
    keys: list[TrustedKey] = []
    warnings: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            key = _parse_line(line, lineno, warnings, path)
        except ValueError as exc:
            raise MalformedTrustFileError(
                f"trust file line is malformed: {exc}",
                path=str(path),
                line=lineno,
                expected='principals [namespaces="ftmanifest",valid-after="..."] ssh-ed25519 KEY',
                observed=line[:120],
                hint="fix or delete the line (see `man ssh-keygen`, ALLOWED SIGNERS)",
            ) from None
        if key is not None:
            keys.append(key)
    return TrustStore(path=path, keys=tuple(keys), warnings=tuple(warnings))


def load_trust(path: Path) -> TrustStore:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TrustFileNotFoundError(
            "trust file (allowed signers) not found",
            path=str(path),
            hint="check the --trust path, or create the file",
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedTrustFileError(
            "trust file is not UTF-8 text", path=str(path), hint="rewrite it as UTF-8 text"
        ) from None
    return parse_trust(text, path)
