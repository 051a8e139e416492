"""``ftmanifest backup check``: every backup of a folder, without the key or with it.

Layer: judging rooms - edge (reads the backup files; returns findings).

Without a key: each ``*.meta.json`` is verified (signature by a trusted key,
fields, its own name), then the files it names are hashed (archive and, for a
passphrase backup, the key file) and the age header's recipient stanzas are
compared with the recipients the metadata lists.  Files that no metadata
names are reported: an archive whose metadata is gone is an error (it can be
neither verified nor restored), a temp file left by a crash a warning, and
so is the staging folder (decrypted files) of a restore from this folder
that was killed; a folder with no backup to verify is an error, never OK.  With ``read_data``
and identities, every archive is decrypted and every member judged against
the signed index, nothing written.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.backup.destination import left_staging
from ftmanifest.backup.keys import parse_recipient
from ftmanifest.backup.meta import (
    ARCHIVE_SUFFIX,
    KEY_SUFFIX,
    META_SUFFIX,
    Meta,
    finding_of,
    read_meta,
    trust_for,
)
from ftmanifest.backup.unpack import hash_archive, read_archive
from ftmanifest.errors import FtManifestError, InputError, InputNotFoundError
from ftmanifest.findings import Finding

HEADER_MAX_BYTES = 64 * 1024


@dataclass
class Checked:
    meta_path: Path
    meta: Meta | None
    signers: tuple[str, ...] = ()
    data_read: bool = False
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


def _finding(rule: str, message: str, path: Path, **kw: Any) -> Finding:
    return Finding(kind="backup", rule=f"backup.{rule}", message=message, path=str(path), **kw)


def header_stanzas(path: Path) -> list[list[str]]:
    """The recipient stanza lines (``-> TYPE ARGS``) of an age file, split."""
    with open(path, "rb") as fh:
        head = fh.read(HEADER_MAX_BYTES)
    lines = head.split(b"\n")
    if not lines or lines[0] != b"age-encryption.org/v1":
        raise ValueError("not an age v1 file")
    out: list[list[str]] = []
    for line in lines[1:]:
        if line.startswith(b"---"):
            return out
        if line.startswith(b"-> "):
            out.append(line[3:].decode("ascii", "replace").split())
    raise ValueError("the age header does not end within 64 KiB")


def _recipient_findings(meta: Meta, archive: Path) -> list[Finding]:
    try:
        stanzas = header_stanzas(archive)
    except (OSError, ValueError) as exc:
        return [_finding("header-unreadable", f"the age header cannot be read: {exc}", archive)]
    x25519 = sum(1 for s in stanzas if s and s[0] == "X25519")
    ssh_tags = sorted(s[1] for s in stanzas if len(s) > 1 and s[0] == "ssh-ed25519")
    want_x = sum(1 for r in meta.recipients if r.get("type") in ("x25519", "scrypt"))
    want_tags = sorted(_tag(r) for r in meta.recipients if r.get("type") == "ssh-ed25519")
    if x25519 == want_x and ssh_tags == want_tags:
        return []
    return [
        _finding(
            "recipients-mismatch",
            "the age header's recipients are not the ones the metadata lists",
            archive,
            field="recipients",
            expected=f"{want_x} X25519 and ssh-ed25519 tags {want_tags}",
            observed=f"{x25519} X25519 and ssh-ed25519 tags {ssh_tags}",
            hint="the archive was re-encrypted or swapped; restore from another copy",
        )
    ]


def _tag(recipient: dict[str, str]) -> str:
    key = recipient.get("key")
    if not key:
        return "?"
    tag = parse_recipient(key).stanza_tag()
    return tag or "?"


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def check_one(
    meta_path: Path,
    *,
    trust: Any,
    identities: Callable[[Meta], Sequence[Any]] | None = None,
) -> Checked:
    try:
        meta, signers = read_meta(meta_path, trust=trust)
    except FtManifestError as exc:
        return Checked(meta_path, None, findings=[finding_of(exc, meta_path)])
    out = Checked(meta_path, meta, signers)
    folder = meta_path.parent
    archive = folder / meta.archive_name
    try:
        hash_archive(archive, meta)
    except FtManifestError as exc:
        out.findings.append(finding_of(exc, archive))
        return out
    if meta.key_file_sha256:
        key_path = folder / meta.key_name
        if key_path.is_file():
            got = f"sha256:{_digest(key_path)}"
        else:
            got = "not a regular file" if os.path.lexists(key_path) else "missing"
        if got != f"sha256:{meta.key_file_sha256}":
            out.findings.append(
                _finding(
                    "key-file-mismatch",
                    "the passphrase key file is missing or changed",
                    key_path,
                    field="key_file.sha256",
                    expected=f"sha256:{meta.key_file_sha256}",
                    observed=got,
                    hint="restore the key file from another copy of the backup; "
                    "without it the archive cannot be opened",
                )
            )
    out.findings += _recipient_findings(meta, archive)
    if identities is not None and out.ok:
        try:
            read_archive(archive, meta, identities(meta), trust=trust, hashed=True)
            out.data_read = True
        except FtManifestError as exc:
            out.findings.append(finding_of(exc, archive))
    return out


def check_folder(
    folder: Path,
    *,
    trust_path: Path | None = None,
    identities: Callable[[Meta], Sequence[Any]] | None = None,
) -> tuple[list[Checked], list[Finding]]:
    """Every backup in ``folder``, and findings about files no backup names."""
    if not folder.is_dir():
        if not os.path.lexists(folder):
            raise InputNotFoundError("backup folder not found", path=str(folder))
        raise InputError("not a folder", path=str(folder), expected="the backups folder")

    paths = sorted(folder.glob("*" + META_SUFFIX))
    trust = trust_for(paths[0], trust_path) if paths else None  # trust problems raise
    checked = [check_one(p, trust=trust, identities=identities) for p in paths]
    named: set[str] = {c.meta_path.name for c in checked}
    for c in checked:
        if c.meta is not None:
            named.update(c.meta.file_names())
        else:  # refused above (an untrusted signer, damage): its files are no leftovers
            backup_id = c.meta_path.name[: -len(META_SUFFIX)]
            named.update((backup_id + ARCHIVE_SUFFIX, backup_id + KEY_SUFFIX))
    stray: list[Finding] = []
    for p in sorted(folder.iterdir()):
        if p.name in named or p.name.startswith("prune-log"):
            continue
        if _without_metadata(p):
            stray.append(_missing_metadata(p))
        elif p.name.endswith((ARCHIVE_SUFFIX, KEY_SUFFIX)) or p.name.endswith(".tmp"):
            stray.append(
                _finding(
                    "orphan",
                    "no verified metadata names this file (an incomplete or foreign backup)",
                    p,
                    severity="warning",
                    hint="delete it if it is a leftover of an interrupted backup",
                )
            )
    for staging, dest in left_staging(folder):
        stray.append(
            _finding(
                "restore-interrupted",
                "a restore of a backup in this folder was interrupted and left its "
                "staging folder, with decrypted files in it",
                Path(staging),
                severity="warning",
                hint=f"restore to {dest} again (it removes this folder first), or delete it",
            )
        )
    if not checked:
        stray.append(
            _finding(
                "nothing-verified",
                "no backup in this folder could be verified",
                folder,
                expected=f"at least one <id>{META_SUFFIX} with its <id>{ARCHIVE_SUFFIX}",
                observed="no metadata file",
                hint="check the folder the backups were written to (backup create --out)",
            )
        )
    return checked, stray


def refused(checked: Sequence[Checked], stray: Sequence[Finding]) -> bool:
    """What ``backup check`` exits 1 on: a backup refused, or an error about
    the folder (an archive without metadata, nothing to verify)."""
    return any(not c.ok for c in checked) or any(f.severity == "error" for f in stray)


def _without_metadata(path: Path) -> bool:
    """An archive whose ``<id>.meta.json`` is not there (deleted, or a backup
    interrupted before its last write)."""
    name = path.name
    if not name.endswith(ARCHIVE_SUFFIX) or name.endswith(KEY_SUFFIX):
        return False
    meta = path.with_name(name[: -len(ARCHIVE_SUFFIX)] + META_SUFFIX)
    return not os.path.lexists(meta)


def _missing_metadata(archive: Path) -> Finding:
    meta_name = archive.name[: -len(ARCHIVE_SUFFIX)] + META_SUFFIX
    return _finding(
        "metadata-mismatch",
        "an archive without its signed metadata: it can be neither verified nor restored",
        archive,
        field="metadata",
        expected=meta_name,
        observed="missing",
        hint=f"put {meta_name} back from another copy of the backup; delete the archive "
        "only if it is what an interrupted backup left",
    )
