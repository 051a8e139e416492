"""The signed metadata in clear text beside each archive.

Layer: judging rooms - signing client (edge: reads and writes ``<id>.meta.json``).

A backup is the files ``<id>.age`` (the age archive), ``<id>.meta.json``
(this statement) and, for a passphrase backup, ``<id>.key.age`` (the
archive's X25519 identity, encrypted with the passphrase).  The metadata is a
DSSE/in-toto statement of type ``PREDICATE_TYPE`` whose subjects are the
other files by name and sha256, and whose predicate says which backup it is
(id, kind, experiment, manifest digest, tags, signed creation time, sizes,
recipients, the sha256 of the index inside and of the archive's age header).
So integrity, recipients and retention can be judged without the key, and an
archive that was swapped, renamed, replayed under another backup's metadata,
re-encrypted or truncated is refused before anything it holds is kept
(``unpack``: its size and age header before age starts; the whole archive's
sha256 by ``backup check``, and by restore when it refuses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ftmanifest.backup.agechild import HEADER_MAX
from ftmanifest.backup.errors import MetadataMismatchError
from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from ftmanifest.signing.attest import sign_statement, verify_statement
from ftmanifest.signing.dsse import parse_envelope
from ftmanifest.signing.errors import (
    BadSignatureError,
    ExpiredKeyError,
    NotYetValidKeyError,
    SignatureRefusedError,
    SigningInputError,
    ThresholdNotMetError,
    UnknownKeyError,
    WrongNamespaceError,
    WrongPayloadTypeError,
)
from ftmanifest.signing.intoto import Subject
from ftmanifest.signing.locate import choose_backup_trust_file
from ftmanifest.signing.trust import load_trust
from ftmanifest.untrusted import read_untrusted

PREDICATE_TYPE = "https://ftmanifest.dev/backup/v1"
META_SUFFIX = ".meta.json"
ARCHIVE_SUFFIX = ".age"
KEY_SUFFIX = ".key.age"
KINDS = ("data", "checkpoint", "logs", "adapter", "run")
ID_RE = re.compile(r"(data|checkpoint|logs|adapter|run)-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}")
META_MAX_BYTES = 1 << 20
PRECISE_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
SEQUENCE_MAX = 1 << 53


def new_backup_id(kind: str, created: datetime) -> str:
    import secrets

    return f"{kind}-{created.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(6)}"


@dataclass(frozen=True)
class Meta:
    backup_id: str
    kind: str
    created: datetime  # aware, UTC, whole seconds
    archive_sha256: str  # hex
    archive_size: int
    index_sha256: str  # hex of the index member's bytes
    files: int
    bytes: int  # plaintext bytes of the files
    recipients: tuple[dict[str, str], ...]
    experiment_id: str | None = None
    manifest_digest: str | None = None
    tags: tuple[str, ...] = ()
    key_file_sha256: str | None = None  # passphrase backups
    # the order of backups made in one second (absent in older metadata)
    created_precise: datetime | None = None  # ``created`` to the microsecond
    sequence: int | None = None  # 1 + the highest sequence in the folder when made
    # the sha256 of the archive's last member, its files' sha256 (absent in older metadata)
    file_digests_sha256: str | None = None
    # the age header (the archive's first bytes, through its MAC line): its size
    # and sha256 (absent in older metadata, and then restore hashes the whole archive)
    archive_header_size: int | None = None
    archive_header_sha256: str | None = None

    @property
    def archive_name(self) -> str:
        return self.backup_id + ARCHIVE_SUFFIX

    @property
    def key_name(self) -> str:
        return self.backup_id + KEY_SUFFIX

    @property
    def meta_name(self) -> str:
        return self.backup_id + META_SUFFIX

    def file_names(self) -> tuple[str, ...]:
        names = [self.archive_name, self.meta_name]
        if self.key_file_sha256:
            names.append(self.key_name)
        return tuple(names)

    def predicate(self) -> dict[str, Any]:
        return _added(self) | {
            "backup_id": self.backup_id,
            "kind": self.kind,
            "created": self.created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "archive": {
                "name": self.archive_name,
                "sha256": self.archive_sha256,
                "size": self.archive_size,
            }
            | _header(self),
            "index_sha256": self.index_sha256,
            "files": self.files,
            "bytes": self.bytes,
            "recipients": [dict(r) for r in self.recipients],
            "experiment_id": self.experiment_id,
            "manifest_digest": self.manifest_digest,
            "tags": list(self.tags),
            "key_file": {"name": self.key_name, "sha256": self.key_file_sha256}
            if self.key_file_sha256
            else None,
        }


def _header(meta: Meta) -> dict[str, Any]:
    if meta.archive_header_sha256 is None:
        return {}
    return {"header": {"size": meta.archive_header_size, "sha256": meta.archive_header_sha256}}


def _added(meta: Meta) -> dict[str, Any]:
    """The fields older metadata lacks, when set."""
    out: dict[str, Any] = {}
    if meta.file_digests_sha256 is not None:
        out["file_digests_sha256"] = meta.file_digests_sha256
    if meta.created_precise is not None:
        out["created_precise"] = meta.created_precise.strftime(PRECISE_FORMAT)
    if meta.sequence is not None:
        out["sequence"] = meta.sequence
    return out


def next_sequence(folder: Path) -> int:
    """1 + the highest ``sequence`` among the metadata in ``folder`` (read
    without verifying: it only orders, and a planted number only makes the
    next one larger)."""
    import json

    top = 0
    for path in folder.glob("*" + META_SUFFIX):
        try:
            raw = read_untrusted(path, limit=META_MAX_BYTES, what="backup metadata", hint="")
            seq = json.loads(parse_envelope(raw, str(path)).payload)["predicate"].get("sequence")
        except Exception:  # noqa: BLE001 - unreadable metadata has no sequence to follow
            continue
        if isinstance(seq, int) and not isinstance(seq, bool) and 0 < seq < SEQUENCE_MAX:
            top = max(top, seq)
    return top + 1


def sign_meta(meta: Meta, key: Any) -> bytes:
    subjects = [Subject(meta.archive_name, {"sha256": meta.archive_sha256})]
    if meta.key_file_sha256:
        subjects.append(Subject(meta.key_name, {"sha256": meta.key_file_sha256}))
    return sign_statement(subjects, PREDICATE_TYPE, meta.predicate(), key).to_bytes()


@dataclass(frozen=True)
class Listed:
    """One ``*.meta.json`` of a folder: its verified metadata, or why not."""

    meta_path: Path
    meta: Meta | None
    signers: tuple[str, ...] = ()
    findings: list[Finding] = field(default_factory=list)


def trust_for(meta_path: Path, trust_path: Path | None = None) -> Any:
    """The allowed signers for backups in ``meta_path``'s folder: ``--trust``,
    ``$FTMANIFEST_TRUST_FILE``, or the project's (the current folder's
    repository), never one from the backups folder (whoever writes
    the backups could plant it).  A missing, unsafe or malformed trust file
    raises (the user's input)."""
    return load_trust(choose_backup_trust_file(meta_path.parent, trust_path).path)


def meta_path_of(backup: Path) -> Path:
    """The ``<id>.meta.json`` of a backup named by its archive, key file or metadata."""
    name = backup.name
    for suffix in (META_SUFFIX, KEY_SUFFIX, ARCHIVE_SUFFIX):
        if name.endswith(suffix):
            return backup.with_name(name[: -len(suffix)] + META_SUFFIX)
    return backup.with_name(name + META_SUFFIX)


def read_meta(
    meta_path: Path, *, trust_path: Path | None = None, trust: Any = None
) -> tuple[Meta, tuple[str, ...]]:
    """Verify the signature, then the predicate; raise on any defect.

    ``trust`` (a loaded ``TrustStore``) or else ``trust_for(meta_path,
    trust_path)``.  An untrusted or bad signature and a predicate that does
    not fit its file name are refusals."""
    hint = "pass the .meta.json file written beside the backup"
    try:
        raw = read_untrusted(meta_path, limit=META_MAX_BYTES, what="backup metadata", hint=hint)
    except FileNotFoundError:
        raise MetadataMismatchError(
            "the backup's metadata file is missing",
            path=str(meta_path),
            hint="a backup without its signed metadata cannot be checked; keep the two together",
        ) from None
    if trust is None:
        trust = trust_for(meta_path, trust_path)
    try:
        verified = verify_statement(
            raw,
            trust=trust,
            expected_predicate_type=PREDICATE_TYPE,
            path=meta_path,
            resign_hint="this metadata was not written by ftmanifest backup",
        )
    except (SignatureRefusedError, SigningInputError) as exc:
        raise _worded_for_backups(exc) from None
    meta = parse_predicate(verified.predicate, str(meta_path))
    if meta_path.name != meta.meta_name:
        raise MetadataMismatchError(
            "the metadata file was renamed or belongs to another backup",
            path=str(meta_path),
            field="backup_id",
            expected=meta.meta_name,
            observed=meta_path.name,
            hint="restore and check backups under the names they were written with",
        )
    if verified.statement.digest_of(meta.archive_name) != f"sha256:{meta.archive_sha256}":
        raise _bad(str(meta_path), "the subject does not name the archive's digest")
    return meta, verified.verdict.valid_keyids


_UNTRUSTED = (
    UnknownKeyError,
    ExpiredKeyError,
    NotYetValidKeyError,
    WrongNamespaceError,
    ThresholdNotMetError,
)
_DAMAGED_HINT = (
    "the backup's metadata was edited or damaged: do not trust this backup; restore "
    "from another copy of it, or make a new one with `ftmanifest backup create`"
)


def _worded_for_backups(exc: FtManifestError) -> FtManifestError:
    """A signing refusal about ``<id>.meta.json`` in a backup's words: an
    untrusted signer says so (the message names its key, ``expected`` the trust
    file); a damaged envelope gets a backup's fix, not "re-sign the manifest",
    and is the guide's ``metadata-mismatch`` (exit 1), not the signing layer's
    unusable input."""
    if isinstance(exc, _UNTRUSTED):
        exc.message = f"the backup's signer is not trusted: {exc.message}"
        exc.args = (exc.message,)
    elif isinstance(exc, SigningInputError):
        return MetadataMismatchError(
            f"the backup metadata is damaged: {exc.message}",
            path=exc.path,
            field=exc.field or "envelope",
            expected=exc.expected or "the signed DSSE envelope ftmanifest backup wrote",
            observed=exc.observed or exc.reason,
            hint=_DAMAGED_HINT,
        )
    elif isinstance(exc, (WrongPayloadTypeError, BadSignatureError)):
        exc.hint = _DAMAGED_HINT
    return exc


def parse_predicate(p: dict[str, Any], where: str) -> Meta:
    try:
        backup_id = p["backup_id"]
        if not isinstance(backup_id, str) or not ID_RE.fullmatch(backup_id):
            raise _bad(where, "backup_id is not a backup id")
        kind = p["kind"]
        if kind not in KINDS or not backup_id.startswith(kind + "-"):
            raise _bad(where, "kind is not one of " + ", ".join(KINDS))
        created = datetime.strptime(p["created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        archive = p["archive"]
        if archive["name"] != backup_id + ARCHIVE_SUFFIX:
            raise _bad(where, "archive.name is not the backup id's archive")
        key_file = p.get("key_file")
        precise, sequence = _parse_ordering(p, created, where)
        header_size, header_sha256 = _parse_header(archive, where)
        return Meta(
            backup_id=backup_id,
            kind=kind,
            created=created,
            archive_sha256=_hex(archive["sha256"], where),
            archive_size=_count(archive["size"], where),
            index_sha256=_hex(p["index_sha256"], where),
            files=_count(p["files"], where),
            bytes=_count(p["bytes"], where),
            recipients=tuple(_recipient(r, where) for r in p["recipients"]),
            experiment_id=_opt_str(p.get("experiment_id"), where),
            manifest_digest=_opt_str(p.get("manifest_digest"), where),
            tags=tuple(_opt_str(t, where) or "" for t in p.get("tags", [])),
            key_file_sha256=_hex(key_file["sha256"], where) if key_file else None,
            created_precise=precise,
            sequence=sequence,
            file_digests_sha256=_opt_hex(p.get("file_digests_sha256"), where),
            archive_header_size=header_size,
            archive_header_sha256=header_sha256,
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, MetadataMismatchError):
            raise
        raise _bad(where, f"missing or wrong field ({exc})") from None


def _parse_ordering(
    p: dict[str, Any], created: datetime, where: str
) -> tuple[datetime | None, int | None]:
    precise = None
    if p.get("created_precise") is not None:
        precise = datetime.strptime(p["created_precise"], PRECISE_FORMAT).replace(
            tzinfo=timezone.utc
        )
        if precise.replace(microsecond=0) != created:
            raise _bad(where, "created_precise is not the same second as created")
    sequence = p.get("sequence")
    if sequence is not None and not (_count(sequence, where) < SEQUENCE_MAX):
        raise _bad(where, f"sequence is not below {SEQUENCE_MAX}")
    return precise, sequence


def _parse_header(archive: dict[str, Any], where: str) -> tuple[int | None, str | None]:
    header = archive.get("header")
    if header is None:
        return None, None
    size = _count(header["size"], where)
    if not 0 < size <= min(HEADER_MAX, archive["size"]):
        raise _bad(where, f"archive.header.size is not between 1 and {HEADER_MAX} "
                   "and within the archive")  # fmt: skip
    return size, _hex(header["sha256"], where)


def _opt_hex(value: Any, where: str) -> str | None:
    return None if value is None else _hex(value, where)


def _hex(value: Any, where: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{64}", value):
        raise _bad(where, "a sha256 is not 64 lowercase hex digits")
    return value


def _count(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _bad(where, "a size or count is not a whole number")
    return value


def _opt_str(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _bad(where, "a text field is not text")
    return value


def _recipient(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _bad(where, "a recipient is not an object of text fields")
    return dict(value)


def _bad(where: str, what: str) -> MetadataMismatchError:
    return MetadataMismatchError(
        f"the backup metadata is malformed: {what}",
        path=where,
        hint="this metadata was not written by ftmanifest backup; do not trust the backup",
    )


def list_backups(folder: Path, *, trust_path: Path | None = None) -> list[Listed]:
    """Every ``*.meta.json`` in ``folder`` (not below), verified; a file that
    cannot be verified is listed with the finding that says why."""
    paths = sorted(folder.glob("*" + META_SUFFIX))
    trust = trust_for(paths[0], trust_path) if paths else None  # trust problems raise
    out: list[Listed] = []
    for meta_path in paths:
        try:
            meta, signers = read_meta(meta_path, trust=trust)
        except FtManifestError as exc:
            out.append(Listed(meta_path, None, (), [finding_of(exc, meta_path)]))
        else:
            out.append(Listed(meta_path, meta, signers))
    return out


def finding_of(exc: Any, path: Path) -> Finding:
    """A refusal as a finding of ``backup check``."""
    return Finding(
        kind="backup",
        rule="backup." + (getattr(exc, "reason", "") or type(exc).__name__),
        message=getattr(exc, "message", str(exc)),
        path=str(getattr(exc, "path", None) or path),
        field=getattr(exc, "field", None),
        expected=getattr(exc, "expected", None),
        observed=getattr(exc, "observed", None),
        hint=getattr(exc, "hint", None),
    )
