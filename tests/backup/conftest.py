"""Keys, trust files and backup builders shared by the backup tests.

A signing key and the ``allowed_signers`` file trusting it, an age X25519
identity (``key.txt``, 0600) and its recipient, built once per worker; plain
helpers that make a backup through the library, re-sign a backup's metadata
(an attacker who holds the signing key but not the age key) and build a
hostile archive with the standard library's ``tarfile``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import shutil
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.backup.agechild import HEADER_MAX, header_size
from ftmanifest.backup.create import Created, create_backup
from ftmanifest.backup.index import INDEX_MEMBER, Entry, sign_index
from ftmanifest.backup.keys import Recipient, load_identities, parse_recipient
from ftmanifest.backup.meta import Meta, new_backup_id, read_meta, sign_meta
from ftmanifest.backup.restore import Restored, restore
from ftmanifest.signing.trust import TrustStore, load_trust

AGE = shutil.which("age")
needs_age = pytest.mark.skipif(
    AGE is None, reason="the age command line is not installed (Debian/Ubuntu: apt install age)"
)


@dataclass(frozen=True)
class Keys:
    """Everything a backup test needs to sign, encrypt, trust and decrypt."""

    folder: Path
    signing: Any  # Ed25519PrivateKey
    signing_path: Path  # OpenSSH private key, 0600 (``--key``)
    trust_path: Path  # allowed_signers trusting ``signing``
    identity_path: Path  # age identity file, 0600 (``-i``)
    recipient: Recipient
    other_signing: Any  # a key nobody trusts
    other_identity_path: Path  # an age identity the backups are not encrypted to

    @property
    def trust(self) -> TrustStore:
        return load_trust(self.trust_path)

    def identities(self) -> list[Any]:
        return load_identities(self.identity_path)


def _age_identity(path: Path) -> str:
    """Write a fresh age identity file (0600); return its public ``age1...`` key."""
    import pyrage

    identity = pyrage.x25519.Identity.generate()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(f"# public key: {identity.to_public()}\n{identity}\n")
    return str(identity.to_public())


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ftmanifest.signing.keys import generate_key_pair, load_private_key, public_key_line

    folder = tmp_path_factory.mktemp("backup-keys")
    signing_path = folder / "signing"
    generate_key_pair(signing_path, comment="backup-test")
    signing = load_private_key(signing_path)
    trust_path = folder / "allowed_signers"
    line = public_key_line(signing.public_key(), "backup-test")
    trust_path.write_text(f'me namespaces="ftmanifest" {line}\n', encoding="utf-8")
    recipient = parse_recipient(_age_identity(folder / "key.txt"))
    _age_identity(folder / "other.txt")
    return Keys(
        folder,
        signing,
        signing_path,
        trust_path,
        folder / "key.txt",
        recipient,
        Ed25519PrivateKey.generate(),
        folder / "other.txt",
    )


@pytest.fixture(autouse=True)
def _no_pinned_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust comes from the test's own ``--trust``/``trust_path``, never the caller's shell."""
    monkeypatch.delenv("FTMANIFEST_TRUST_FILE", raising=False)


def backup(keys: Keys, paths: Sequence[Path], to: Path, **kw: Any) -> Created:
    """A backup through the library, encrypted to ``keys.recipient`` unless told otherwise."""
    if "passphrase" not in kw:
        kw.setdefault("recipients", [keys.recipient])
    return create_backup(list(paths), to, key=keys.signing, **kw)


def restore_meta(
    keys: Keys, meta_path: Path, dest: Path, identities: Sequence[Any] | None = None, **kw: Any
) -> Restored:
    """What ``ftmanifest restore META --to DEST -i key.txt`` does, through the library."""
    meta, _ = read_meta(meta_path, trust_path=keys.trust_path)
    return restore(
        meta_path.parent / meta.archive_name,
        meta,
        keys.identities() if identities is None else identities,
        dest,
        trust=keys.trust,
        **kw,
    )


def resign(created: Created, signing: Any, **changes: Any) -> Meta:
    """Re-sign ``created``'s metadata over its archive as it is on disk now,
    with ``changes`` to other fields: what an attacker holding the signing key
    (but not the age key) can do."""
    data = created.archive.read_bytes()
    meta = dataclasses.replace(
        created.meta,
        archive_sha256=hashlib.sha256(data).hexdigest(),
        archive_size=len(data),
        **(header_fields(data) | changes),
    )
    created.meta_path.write_bytes(sign_meta(meta, signing))
    return meta


def header_fields(archive: bytes) -> dict[str, Any]:
    """The metadata's fields naming ``archive``'s age header, as ``backup
    create`` writes them (None when it has no header to name)."""
    size = header_size(archive[:HEADER_MAX])
    return {
        "archive_header_size": size,
        "archive_header_sha256": hashlib.sha256(archive[:size]).hexdigest() if size else None,
    }


def sha256_of(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def tree_of(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every file and folder under ``root``: (type, mode, sha256 for files)."""
    out: dict[str, tuple[str, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = ("symlink", 0, os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", st.st_mode & 0o777, "")
            else:
                out[rel] = ("file", st.st_mode & 0o777, sha256_of(p))
    return out


def refused_everywhere(keys: Keys, tmp_path: Path, meta_path: Path, error: type, match: str) -> Any:
    """``restore`` of ``meta_path`` raises ``error`` (matching ``match``) and
    leaves nothing, and ``backup check`` of its folder agrees; the error."""
    from ftmanifest.backup.check import check_folder

    dest = tmp_path / "dest"
    with pytest.raises(error, match=match) as caught:
        restore_meta(keys, meta_path, dest)
    no_staging(dest)
    checked, _ = check_folder(
        meta_path.parent, trust_path=keys.trust_path, identities=lambda m: keys.identities()
    )
    assert [c.ok for c in checked] == [False]  # backup check agrees
    return caught.value


def no_staging(dest: Path) -> None:
    """DEST was not made and no staging folder is left beside it."""
    assert not os.path.lexists(dest), f"{dest} exists after a refusal"
    left = [p.name for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}.")]
    assert left == [], f"left beside DEST: {left}"


# -- hostile archives ---------------------------------------------------------


@dataclass
class Member:
    """One tar member of a hand-made archive."""

    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    mode: int = 0o644
    linkname: str = ""
    size: int | None = None  # header size when it differs from len(data)


def entry_for(name: str, data: bytes, mode: int = 0o644, mtime: int = 1_700_000_000) -> Entry:
    return Entry(name, "file", mode, len(data), hashlib.sha256(data).hexdigest(), mtime)


def signed_index(
    entries: Sequence[Entry], signing: Any, *, backup_id: str | None = None, kind: str = "run"
) -> tuple[bytes, dict[str, Any]]:
    """The index member's bytes over ``entries`` and the head it was signed with."""
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    head = {
        "backup_id": backup_id or new_backup_id(kind, created),
        "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "kind": kind,
        "experiment_id": None,
        "manifest_digest": None,
    }
    return sign_index(entries, head, signing), head


def tar_bytes(members: Sequence[Member], trailer: bytes = b"") -> bytes:
    """A PAX tar of ``members`` as the standard library writes it, then ``trailer``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type = m.type
            info.mode = m.mode
            info.mtime = 1_700_000_000
            info.linkname = m.linkname
            if m.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
                info.size = len(m.data) if m.size is None else m.size
                body = m.data.ljust(info.size, b"x")[: info.size]
                tar.addfile(info, io.BytesIO(body))
            else:
                tar.addfile(info)
    return buf.getvalue() + trailer


def write_backup(
    to: Path,
    tar: bytes,
    index_bytes: bytes,
    head: dict[str, Any],
    entries: Sequence[Entry],
    keys: Keys,
    *,
    encrypted: bytes | None = None,
    **meta_fields: Any,
) -> Path:
    """Encrypt ``tar`` to ``keys.recipient`` (or take ``encrypted``), write it
    with metadata (and ``meta_fields``) signed by the trusted key; return the
    metadata path.  The metadata names the archive's age header, as
    ``backup create`` writes it, unless ``meta_fields`` say otherwise."""
    import pyrage

    to.mkdir(parents=True, exist_ok=True)
    data = encrypted if encrypted is not None else pyrage.encrypt(tar, [keys.recipient.to_age()])
    meta = Meta(
        backup_id=head["backup_id"],
        kind=head["kind"],
        created=datetime.strptime(head["created"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=timezone.utc
        ),
        archive_sha256=hashlib.sha256(data).hexdigest(),
        archive_size=len(data),
        index_sha256=hashlib.sha256(index_bytes).hexdigest(),
        files=sum(1 for e in entries if e.type == "file"),
        bytes=sum(e.size for e in entries),
        recipients=(keys.recipient.to_dict(),),
        **(header_fields(data) | meta_fields),
    )
    (to / meta.archive_name).write_bytes(data)
    path = to / meta.meta_name
    path.write_bytes(sign_meta(meta, keys.signing))
    return path


def hostile_backup(
    to: Path,
    keys: Keys,
    members: Sequence[Member],
    *,
    entries: Sequence[Entry] | None = None,
    trailer: bytes = b"",
    index_signer: Any = None,
) -> Path:
    """A backup whose index (signed by the trusted key unless ``index_signer``)
    lists ``entries`` (default: ``ok.txt``) but whose tar holds the index
    then ``members``; returns its metadata path."""
    listed = list(entries) if entries is not None else [entry_for("ok.txt", b"ok\n")]
    index_bytes, head = signed_index(listed, index_signer or keys.signing)
    tar = tar_bytes([Member(INDEX_MEMBER, index_bytes, mode=0o600), *members], trailer)
    return write_backup(to, tar, index_bytes, head, listed, keys)
