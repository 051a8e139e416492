"""Who may decrypt a backup, and what opens one: the policy over ``keys``.

Layer: judging rooms (backup).  ``recipients_for`` decides whom ``backup
create`` encrypts to: the keys given, else the signed manifest's
``security.backup_recipients`` (only from a manifest a trusted key signed: an
edited manifest could name an outsider's key).  ``identities_for`` decides what
``backup check --read-data`` and ``restore`` decrypt with: the identity files
given, else a passphrase backup's own key file, unlocked with the passphrase.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.backup.keys import (
    Identity,
    Recipient,
    load_identities,
    parse_recipient,
    passphrase_source,
    read_recipients_file,
    unique,
)
from ftmanifest.errors import UsageError
from ftmanifest.signing.verify import verify_manifest_signature

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest


def recipients_for(
    recipients: Sequence[str],
    recipient_files: Sequence[Path],
    *,
    manifest: LoadedManifest | None = None,
    trust_path: Path | None = None,
    passphrase: bool = False,
) -> tuple[list[Recipient], list[str]]:
    """The recipients a new backup is encrypted to (none for a passphrase backup
    unless some were given, which the caller refuses), and the lines of the
    ``-R`` files skipped, each with its reason (for the caller to warn).

    ``recipients`` are ``-r`` texts, ``recipient_files`` ``-R`` files; with
    neither and no ``passphrase``, the recipients of ``manifest`` (a loaded
    manifest) once its signature is verified against ``trust_path``.
    """
    out = [parse_recipient(r, source="-r") for r in recipients]
    skipped: list[str] = []
    for path in recipient_files:
        found, passed_over = read_recipients_file(path)
        out += found
        skipped += passed_over
    if not out and manifest is not None and not passphrase:
        verify_manifest_signature(manifest.path, manifest.canonical(), trust_path=trust_path)
        out = [
            parse_recipient(r, source="security.backup_recipients")
            for r in manifest.manifest.security.backup_recipients
        ]
    return unique(out), skipped


def identities_for(
    identity_files: Sequence[Path],
    *,
    passphrase_env: str | None = None,
    ask_passphrase: bool = False,
) -> Callable[[Any, Path | None], list[Identity]]:
    """A function giving the identities for one backup's metadata (and its folder):
    the ``identity_files`` (read now), or the passphrase backup's own key file
    unlocked with the passphrase (from ``passphrase_env``, else the terminal,
    asked at most once)."""
    ask = passphrase_source(passphrase_env, new=False) if passphrase_env or ask_passphrase else None
    cached: dict[str, str] = {}

    def secret() -> str:
        if "value" not in cached:
            cached["value"] = (ask or passphrase_source(None, new=False))()
        return cached["value"]

    loaded = [i for path in identity_files for i in load_identities(path, secret)]

    def for_meta(meta: Any, folder: Path | None = None) -> list[Identity]:
        if meta.key_file_sha256 and not identity_files:
            key_file = (folder or Path(".")) / meta.key_name
            return load_identities(key_file, secret, sha256=meta.key_file_sha256)
        if not loaded:
            raise UsageError(
                "no identity to decrypt with",
                field="-i",
                hint="pass -i IDENTITY (the private key the backup was "
                "encrypted to), or --passphrase-env VAR for a passphrase backup",
            )
        return loaded

    return for_meta
