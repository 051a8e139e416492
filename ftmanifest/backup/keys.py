"""Who can open a backup: recipients, identities and passphrases.

Layer: judging rooms - edge (reads key files, the environment and the terminal).

Recipients are age X25519 keys (``age1...``) or OpenSSH ``ssh-ed25519`` public
keys, so the keys a team lists in ``allowed_signers`` can receive backups
(``-R .ftmanifest/allowed_signers`` reads the ed25519 keys that file trusts
for ftmanifest now, by the trust file's own rules).
Other ssh key types are refused: age's ssh-rsa recipient exists, but the
design names ed25519 only.

Identities are read from an age identity file (``AGE-SECRET-KEY-1...``
lines), an OpenSSH private key (an encrypted one is unlocked with
cryptography and handed to age unencrypted, in memory only), or an age file
holding either, encrypted with a passphrase.  A key file that group or others
can read is refused, as ssh refuses it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from ftmanifest.backup.errors import IdentityFileError, MetadataMismatchError, RecipientError
from ftmanifest.errors import UsageError
from ftmanifest.signing import KEY_TYPES
from ftmanifest.signing.keys import (
    check_private_key_mode,
    fingerprint_of_blob,
    load_private_key,
    public_key_from_blob,
)
from ftmanifest.signing.passphrase import check_env_name, for_unlock, from_env, require_tty
from ftmanifest.signing.trust import (
    STATUS_EXPIRED,
    STATUS_NOT_YET_VALID,
    STATUS_OK,
    TrustedKey,
    parse_trust,
)
from ftmanifest.untrusted import read_untrusted

RecipientKind = Literal["x25519", "ssh-ed25519"]
IDENTITY_MAX_BYTES = 64 * 1024
RECIPIENTS_MAX_BYTES = 1 << 20
_AGE_RECIPIENT = re.compile(r"age1[02-9ac-hj-np-z]{58}")
_AGE_SECRET = re.compile(r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}")
_SSH_WORD = re.compile(r"(ssh-[a-z0-9-]+|ecdsa-[a-z0-9-]+|sk-[a-z0-9@.-]+)\s+([A-Za-z0-9+/=]+)")
PEM_SSH = b"-----BEGIN OPENSSH PRIVATE KEY-----"
AGE_MAGIC = b"age-encryption.org/v1"


@dataclass(frozen=True)
class Recipient:
    """One public key a backup is encrypted to."""

    kind: RecipientKind
    text: str  # canonical: ``age1...`` or ``ssh-ed25519 BASE64`` (no comment)
    fingerprint: str  # the age1 string itself, or OpenSSH's ``SHA256:...``

    def to_age(self) -> Any:
        import pyrage

        if self.kind == "x25519":
            return pyrage.x25519.Recipient.from_str(self.text)
        return pyrage.ssh.Recipient.from_str(self.text)

    def stanza_tag(self) -> str | None:
        """The tag age writes in an ssh-ed25519 stanza (first 4 bytes of the
        SHA-256 of the key blob, unpadded base64); None for X25519."""
        if self.kind != "ssh-ed25519":
            return None
        blob = base64.b64decode(self.text.split()[1])
        return base64.b64encode(hashlib.sha256(blob).digest()[:4]).decode().rstrip("=")

    def to_dict(self) -> dict[str, str]:
        return {"type": self.kind, "fingerprint": self.fingerprint, "key": self.text}


def parse_recipient(text: str, *, source: str = "-r") -> Recipient:
    """A recipient from ``age1...`` or ``ssh-ed25519 BASE64 [comment]``."""
    value = text.strip()
    if value.startswith("age1"):
        if not _AGE_RECIPIENT.fullmatch(value):
            raise _bad_recipient(value, source, "not a well-formed age1 recipient")
        import pyrage

        try:
            pyrage.x25519.Recipient.from_str(value)
        except Exception as exc:  # pyrage.RecipientError; its text names the defect
            raise _bad_recipient(value, source, str(exc)) from None
        return Recipient("x25519", value, value)
    match = _SSH_WORD.match(value)
    if not match:
        raise _bad_recipient(value, source, "neither an age1 key nor an ssh-ed25519 key")
    if match.group(1) != "ssh-ed25519":
        raise _bad_recipient(value, source, f"{match.group(1)} keys cannot receive backups")
    try:
        blob = base64.b64decode(match.group(2), validate=True)
        public_key_from_blob(blob)
    except ValueError as exc:
        raise _bad_recipient(value, source, f"bad ssh-ed25519 key: {exc}") from None
    canonical = f"ssh-ed25519 {base64.b64encode(blob).decode()}"
    return Recipient("ssh-ed25519", canonical, fingerprint_of_blob(blob))


def _bad_recipient(value: str, source: str, why: str) -> RecipientError:
    shown = value if len(value) <= 80 else value[:77] + "..."
    return RecipientError(
        f"cannot encrypt to this recipient: {why}",
        field=source,
        expected="an age X25519 key (age1...) or an OpenSSH ssh-ed25519 public key",
        observed=shown,
        hint="age-keygen -y KEYFILE prints an age1 recipient; ssh-keygen -t ed25519 makes "
        "an ssh key whose .pub line works",
    )


def read_recipients_file(path: Path) -> tuple[list[Recipient], list[str]]:
    """Every recipient in a file, and the lines skipped and why: age recipients
    files (one key per line, ``#`` comments), ``.pub`` lines and allowed_signers
    lines (principals and options before the key).  An allowed_signers line
    counts as the trust file counts it for ftmanifest now (``signing.trust``):
    namespaces naming ftmanifest, within valid-after and valid-before, no
    cert-authority, an Ed25519 key (an expired key's owner must not
    open new backups).  A file where nothing remains is refused."""
    hint = "pass a file of age1 or ssh-ed25519 public keys, one per line"
    try:
        raw = read_untrusted(path, limit=RECIPIENTS_MAX_BYTES, what="recipients file", hint=hint)
    except FileNotFoundError:
        raise RecipientError("recipients file not found", path=str(path), hint=hint) from None
    out: list[Recipient] = []
    skipped: list[str] = []
    signer_lines: list[str] = []  # the allowed_signers lines, others blank (line numbers kept)
    for lineno, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        text = line.strip()
        first = text.split(maxsplit=1)[0] if text else "#"
        signer_lines.append("" if first.startswith(("#", "age1")) or first in KEY_TYPES else line)
        where = f"{path}:{lineno}"
        if first.startswith("age1"):
            out.append(parse_recipient(first, source=where))
        elif first == "ssh-ed25519":
            out.append(parse_recipient(text, source=where))
        elif first in KEY_TYPES:
            skipped.append(f"{where}: {first} keys cannot receive backups (ssh-ed25519 only)")
    out += _current_signers("\n".join(signer_lines), path, skipped)
    if not out:
        raise RecipientError(
            "no key in the recipients file can receive backups",
            path=str(path),
            expected="at least one age1 or ssh-ed25519 key (in an allowed_signers file: "
            'on a line with namespaces="ftmanifest", valid now, not cert-authority)',
            observed="; ".join(skipped) or "no key",
            hint=hint,
        )
    return out, skipped


def _current_signers(text: str, path: Path, skipped: list[str]) -> list[Recipient]:
    """The keys an allowed_signers ``text`` trusts for ftmanifest now; the
    others are added to ``skipped`` with the trust file's reason."""
    store = parse_trust(text, path)
    skipped += store.warnings
    now = datetime.now(timezone.utc)
    out: list[Recipient] = []
    for key in store.keys:
        status = key.status(now)
        if key.keytype != "ssh-ed25519":  # an ECDSA signer cannot open an age file
            skipped.append(f"{path}:{key.line}: {key.keytype} keys cannot receive backups "
                           "(ssh-ed25519 only); skipped")  # fmt: skip
        elif status == STATUS_OK:
            blob = base64.b64encode(key.blob).decode()
            out.append(parse_recipient(f"ssh-ed25519 {blob}", source=f"{path}:{key.line}"))
        else:
            skipped.append(f"{path}:{key.line}: {_not_current(key, status)}; skipped")
    return out


def _not_current(key: TrustedKey, status: str) -> str:
    """Why the trust file does not count ``key`` for ftmanifest now."""

    def when(seconds: int | None) -> str:
        return datetime.fromtimestamp(seconds or 0, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    who = f"{key.fingerprint} ({', '.join(key.principals)})"
    if status == STATUS_EXPIRED:
        return f"{who} expired: valid-before {when(key.valid_before)} has passed"
    if status == STATUS_NOT_YET_VALID:
        return f"{who} is not yet valid: valid-after {when(key.valid_after)} is in the future"
    if key.namespaces is None:
        return f'{who} has no namespaces option (only namespaces="ftmanifest" lines count)'
    return f'{who}: namespaces="{",".join(key.namespaces)}" does not include ftmanifest'


def unique(recipients: list[Recipient]) -> list[Recipient]:
    seen: dict[str, Recipient] = {}
    for r in recipients:
        seen.setdefault(r.text, r)
    return list(seen.values())


# -- identities --------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Identity:
    """A secret key that can open backups, as text age understands: an
    ``AGE-SECRET-KEY-1...`` line or an unencrypted OpenSSH private key (held in
    memory only; handed to the age child process through a pipe)."""

    kind: Literal["x25519", "ssh"]
    secret: str

    def __repr__(self) -> str:  # never print the secret
        return f"Identity({self.kind})"

    def to_age(self) -> Any:
        import pyrage

        if self.kind == "x25519":
            return pyrage.x25519.Identity.from_str(self.secret)
        return pyrage.ssh.Identity.from_buffer(self.secret.encode("ascii"))


def load_identities(
    path: Path, passphrase: Callable[[], str] | None = None, *, sha256: str | None = None
) -> list[Identity]:
    """The identities in ``path``, each checked by pyrage; refuses a file
    others can read, and (``sha256``: a passphrase backup's key file, as its
    signed metadata names it) one whose bytes are not those."""
    hint = "pass the age identity file (age-keygen) or the ssh-ed25519 private key"
    try:
        data = read_untrusted(path, limit=IDENTITY_MAX_BYTES, what="identity file", hint=hint)
    except FileNotFoundError:
        raise IdentityFileError("identity file not found", path=str(path), hint=hint) from None
    check_private_key_mode(path)
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise MetadataMismatchError(
            "the passphrase key file is not the one the backup's signed metadata names",
            path=str(path),
            field="key_file.sha256",
            expected=f"sha256:{sha256}",
            observed=f"sha256:{hashlib.sha256(data).hexdigest()}",
            hint="keep <id>.key.age as the backup wrote it; restore from another copy",
        )
    if data.startswith(AGE_MAGIC):
        data = _unlock_age_identity(data, path, passphrase)
        passphrase = None  # an ssh key inside was stored decrypted or asks on the terminal
    return _identities_in(data, path, passphrase)


def _unlock_age_identity(data: bytes, path: Path, passphrase: Callable[[], str] | None) -> bytes:
    import pyrage

    if passphrase is None:
        raise IdentityFileError(
            "the identity file is encrypted with a passphrase and none was given",
            path=str(path),
            hint="pass --archive-passphrase-env VAR, or run in a terminal to be asked",
        )
    try:
        return bytes(pyrage.passphrase.decrypt(data, passphrase()))
    except pyrage.DecryptError:
        from ftmanifest.backup.errors import WrongPassphraseError

        raise WrongPassphraseError(
            "wrong passphrase: the encrypted identity file does not open with it",
            path=str(path),
            hint="check the value of the --archive-passphrase-env variable",
        ) from None


def _identities_in(data: bytes, path: Path, passphrase: Callable[[], str] | None) -> list[Identity]:

    if PEM_SSH in data:
        return [_ssh_identity(data, path, passphrase)]
    text = data.decode("utf-8", "replace")
    keys = _AGE_SECRET.findall(text)
    if not keys:
        raise IdentityFileError(
            "no identity in the file",
            path=str(path),
            expected="AGE-SECRET-KEY-1... lines or an OpenSSH private key",
            observed="neither",
            hint="public keys (age1..., .pub) cannot decrypt; pass the private key file",
        )
    try:
        out = [Identity("x25519", k) for k in keys]
        for identity in out:
            identity.to_age()
        return out
    except Exception as exc:  # pyrage.IdentityError
        raise IdentityFileError(f"bad age identity: {exc}", path=str(path)) from None


def _ssh_identity(data: bytes, path: Path, passphrase: Callable[[], str] | None) -> Identity:
    """An ssh-ed25519 identity; an encrypted key is unlocked here, in memory."""
    import pyrage
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        pyrage.ssh.Identity.from_buffer(data)
        return Identity("ssh", data.decode("ascii"))
    except UnicodeDecodeError:
        raise IdentityFileError("the ssh key is not ASCII text", path=str(path)) from None
    except Exception as exc:  # pyrage.IdentityError
        if "decrypted first" not in str(exc):
            raise IdentityFileError(f"cannot use this ssh key: {exc}", path=str(path)) from None

    unlock = (lambda: passphrase().encode("utf-8")) if passphrase else for_unlock(None, str(path))
    key = load_private_key(path, unlock)
    if not isinstance(key, Ed25519PrivateKey):  # pragma: no cover - load_private_key refuses
        raise IdentityFileError("only ssh-ed25519 keys can open backups", path=str(path))
    plain = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    pyrage.ssh.Identity.from_buffer(plain)
    return Identity("ssh", plain.decode("ascii"))


# -- passphrases --------------------------------------------------------------


PASSPHRASE_MIN_CHARS = 8


def passphrase_source(env_var: str | None, *, new: bool) -> Callable[[], str]:
    """Where a backup passphrase comes from: ``env_var`` or the terminal
    (asked twice for a new backup).  Never the command line.  A new backup's
    passphrase must hold ``PASSPHRASE_MIN_CHARS`` characters besides the
    spaces around it (an old backup's opens with whatever it was made with)."""
    import getpass

    if env_var:
        check_env_name(env_var)

        def from_variable() -> str:
            value = from_env(env_var).decode("utf-8")
            if new:
                _check_new_passphrase(value, "--archive-passphrase-env", f"set {env_var} to")
            if not value:
                raise UsageError(
                    "the passphrase variable is empty", field="--archive-passphrase-env"
                )
            return value

        return from_variable

    def ask() -> str:
        require_tty("a backup passphrase is needed", "--archive-passphrase-env")
        first = getpass.getpass("Backup passphrase: ")
        if new:
            _check_new_passphrase(first, "--archive-passphrase", "type")
        if new and first != getpass.getpass("Same passphrase again: "):
            raise UsageError("the two passphrases differ", hint="run the command again")
        if not first:
            raise UsageError("empty passphrase", hint="type a passphrase")
        return first

    return ask


def _check_new_passphrase(value: str, field: str, how: str) -> None:
    """Refuse a blank or short passphrase for a new backup, saying how long
    it is but never what it is."""
    kept = value.strip()
    if len(kept) >= PASSPHRASE_MIN_CHARS:
        return
    if not value:
        observed = "an empty passphrase"
    elif not kept:
        observed = f"{len(value)} character(s), all whitespace"
    else:
        observed = f"{len(kept)} character(s) besides the spaces around them"
    raise UsageError(
        "the backup passphrase is too short to protect the backup",
        field=field,
        expected=f"at least {PASSPHRASE_MIN_CHARS} characters besides spaces around them",
        observed=observed,
        hint=f"{how} a longer passphrase (a few words), or encrypt to a key with -r",
    )
