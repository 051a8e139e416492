"""``ftmanifest backup``: files -> PAX tar -> age, never plaintext on disk.

Layer: judging rooms - edge (reads the files, writes the backup's three files).

The walk builds the signed index (paths, kinds, modes, sizes: no file is
read), so it can be the archive's first member; then a thread streams the
index and the files as a PAX tar into a pipe to an age child process
(``agechild``), which writes the archive straight into a temp file beside
the target while this process follows it, hashing what age has written
(``pread``).  Each file is read once, through one descriptor whose stat must
be the walk's before and after the read, and its sha256 is taken on the way;
the digests follow the last file as ``DIGESTS_MEMBER``, whose sha256 the
signed metadata names, as it names the archive's sha256 and its age header
(so restore binds the file key without hashing the archive).  A file that
changed since the walk or while being read stops the backup (nothing is
left).  The archive is fsynced, linked into place and its folder fsynced,
then the key file (passphrase backups) and last the signed metadata: a
backup without metadata is incomplete, and metadata never names bytes only
in the page cache.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from ftmanifest.backup.agechild import HEADER_MAX, AgeChild, AgeChildError, header_size
from ftmanifest.backup.errors import BackupInputError, EncryptFailedError
from ftmanifest.backup.index import (
    DIGESTS_MEMBER,
    INDEX_MEMBER,
    PAGE_MEMBER,
    Entry,
    Index,
    Source,
    _changed,
    build,
    check_index_size,
    make_index,
    stat_identity,
)
from ftmanifest.backup.keys import Recipient
from ftmanifest.backup.meta import ARCHIVE_SUFFIX, Meta, new_backup_id, next_sequence, sign_meta
from ftmanifest.backup.pipe import CHUNK, PIPE_BYTES, Worker, Writeback
from ftmanifest.fsutil import atomic_write_bytes, fsync_dir, write_error
from ftmanifest.progress import ProgressSink

BLOCK = 512
RECORD = 20 * BLOCK
_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_OPEN |= getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Created:
    meta: Meta
    archive: Path
    meta_path: Path
    key_path: Path | None


def _header(name: str, *, kind: bytes, mode: int, size: int, mtime: int) -> bytes:
    fast = _ustar(name, kind, mode, size, mtime)
    if fast is not None:
        return fast
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "strict")


_OCTAL_MAX = 8**11  # what a 12-byte octal field holds
_OWNERS = b"0000000\0" * 2  # uid, gid 0
_AFTER_TYPE = bytes(100) + b"ustar\x0000" + bytes(32 + 32 + 8 + 8 + 155 + 12)
_FIXED_SUM = 8 * ord(" ") + sum(_AFTER_TYPE)  # the checksum's own field, blank, and the rest


def _ustar(name: str, kind: bytes, mode: int, size: int, mtime: int) -> bytes | None:
    """The one header block ``tarfile`` writes (PAX format) for a member that needs
    no pax record: an ASCII name of at most 100 bytes, size and time that fit their
    octal fields; None otherwise.  Byte for byte tarfile's (tests/backup), without
    its per-header Python (a third of a backup of 100,000 small files)."""
    if kind == tarfile.DIRTYPE and not name.endswith("/"):
        name += "/"
    if len(name) > 100 or not name.isascii() or not (0 <= size < _OCTAL_MAX):
        return None
    if not 0 <= mtime < _OCTAL_MAX:
        return None
    raw = name.encode("ascii")
    fields = b"%07o\0%s%011o\0%011o\0" % (mode & 0o7777, _OWNERS, size, mtime)
    checksum = sum(raw) + sum(fields) + kind[0] + _FIXED_SUM
    return b"".join((raw.ljust(100, b"\0"), fields, b"%06o\0 " % checksum, kind, _AFTER_TYPE))


def _pad(out: IO[bytes], size: int) -> None:
    rest = -size % BLOCK
    if rest:
        out.write(b"\0" * rest)


def _copy_file(src: Source, out: IO[bytes], progress: ProgressSink | None) -> bytes:
    """Stream one file, refusing any change since the walk; its sha256."""
    entry = src.entry
    try:
        fd = os.open(src.path, _OPEN)
    except OSError:
        raise _changed(src.path, "after the walk (it can no longer be opened)") from None
    try:
        if stat_identity(os.fstat(fd)) != src.identity:
            raise _changed(src.path, "after the walk")
        if entry.size < CHUNK:  # one read of its size and a byte more, no file object
            data = os.read(fd, entry.size + 1)
            if len(data) != entry.size:
                what = "got shorter" if len(data) < entry.size else "grew"
                raise _changed(src.path, f"while it was read (it {what})")
            sha = hashlib.sha256(data)
            out.write(data)
            if progress and data:
                progress.advance(len(data))
        else:
            with os.fdopen(fd, "rb", buffering=0, closefd=False) as fh:
                sha = _stream(fh, entry.size, out, progress, src.path)
        if stat_identity(os.fstat(fd)) != src.identity:
            raise _changed(src.path, "while it was read")
    finally:
        os.close(fd)
    _pad(out, entry.size)
    return sha.digest()


def _stream(fh: IO[bytes], size: int, out: IO[bytes], progress: Any, path: str) -> Any:
    sha = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    left = size
    while left:
        n = fh.readinto(view[: min(CHUNK, left)])  # type: ignore[attr-defined]
        if not n:
            raise _changed(path, "while it was read (it got shorter)")
        sha.update(view[:n])
        out.write(view[:n])
        left -= n
        if progress:
            progress.advance(n)
    if fh.read(1):
        raise _changed(path, "while it was read (it grew)")
    return sha


def write_tar(
    out: IO[bytes],
    index: Index,
    entries: Sequence[Entry],
    sources: Sequence[Source],
    mtime: int,
    progress: ProgressSink | None = None,
) -> str:
    """The whole tar stream: the index, its pages, every entry, then the
    files' sha256 (``DIGESTS_MEMBER``); returns that member's sha256."""
    names = [INDEX_MEMBER, *(PAGE_MEMBER.format(n) for n in range(1, len(index.pages) + 1))]
    for name, data in zip(names, (index.head, *index.pages), strict=True):
        _member(out, name, data, mtime)
    by_path = {s.entry.path: s for s in sources}
    digests = bytearray()
    for e in entries:
        if e.type == "dir":
            out.write(_header(e.path, kind=tarfile.DIRTYPE, mode=e.mode, size=0, mtime=mtime))
            continue
        out.write(_header(e.path, kind=tarfile.REGTYPE, mode=e.mode, size=e.size, mtime=e.mtime))
        digests += _copy_file(by_path[e.path], out, progress)
    _member(out, DIGESTS_MEMBER, digests, mtime)
    out.write(b"\0" * (2 * BLOCK))
    out.flush()
    return hashlib.sha256(digests).hexdigest()


def _member(out: IO[bytes], name: str, data: bytes | bytearray, mtime: int) -> None:
    out.write(_header(name, kind=tarfile.REGTYPE, mode=0o600, size=len(data), mtime=mtime))
    out.write(data)
    _pad(out, len(data))


def create_backup(
    paths: Sequence[Path],
    to: Path,
    *,
    key: Any,
    recipients: Sequence[Recipient] = (),
    passphrase: str | None = None,
    kind: str = "run",
    experiment_id: str | None = None,
    manifest_digest: str | None = None,
    tags: Sequence[str] = (),
    progress: Any = None,
    now: datetime | None = None,
) -> Created:
    """Back up ``paths`` into folder ``to``; signed by ``key`` (Ed25519)."""
    import pyrage

    if bool(recipients) == (passphrase is not None):
        raise ValueError("exactly one of recipients or passphrase")
    entries, sources = build(paths)
    precise = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    created = precise.replace(microsecond=0)
    backup_id = new_backup_id(kind, created)
    head = {
        "backup_id": backup_id,
        "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "kind": kind,
        "experiment_id": experiment_id,
        "manifest_digest": manifest_digest,
        "file_digests": DIGESTS_MEMBER,
    }
    index = make_index(entries, head, key)
    check_index_size(index, len(entries), paths)  # what restore reads, exactly
    key_file: bytes | None = None
    if passphrase is not None:
        identity = pyrage.x25519.Identity.generate()
        text = (
            f"# ftmanifest backup {backup_id}\n# public key: {identity.to_public()}\n{identity}\n"
        )
        key_file = pyrage.passphrase.encrypt(text.encode(), passphrase)
        age_recipients = [str(identity.to_public())]
        listed: tuple[dict[str, str], ...] = (
            {"type": "scrypt", "fingerprint": f"{backup_id}.key.age"},
        )
    else:
        age_recipients = [r.text for r in recipients]
        listed = tuple(r.to_dict() for r in recipients)
    if progress is not None:
        progress.add_total(sum(s.entry.size for s in sources))
    try:
        to.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, to) from None
    _check_space(to, sum(s.entry.size for s in sources))
    sequence = next_sequence(to)
    archive = to / (backup_id + ARCHIVE_SUFFIX)
    tmp = to / f".{backup_id}{ARCHIVE_SUFFIX}.tmp"
    mtime = int(created.timestamp())
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise write_error(exc, tmp) from None
    try:
        try:
            archive_sha256, archive_size, digests_sha256 = _encrypt(
                lambda out: write_tar(out, index, entries, sources, mtime, progress),
                age_recipients,
                fd,
            )
            os.fsync(fd)  # the bytes are on disk before any metadata vouches for them
            header = _age_header(fd)
        finally:
            os.close(fd)
        os.link(tmp, archive)
    except BaseException as exc:
        _unlink(tmp)
        if isinstance(exc, OSError) and not hasattr(exc, "hint"):
            raise write_error(exc, archive) from None
        raise
    _unlink(tmp)
    fsync_dir(to)  # the archive's name too
    meta = Meta(
        backup_id=backup_id,
        kind=kind,
        created=created,
        archive_sha256=archive_sha256,
        archive_size=archive_size,
        index_sha256=hashlib.sha256(index.head).hexdigest(),
        files=len(sources),
        bytes=sum(s.entry.size for s in sources),
        recipients=listed,
        experiment_id=experiment_id,
        manifest_digest=manifest_digest,
        tags=tuple(tags),
        key_file_sha256=hashlib.sha256(key_file).hexdigest() if key_file else None,
        created_precise=precise,
        sequence=sequence,
        file_digests_sha256=digests_sha256,
        archive_header_size=len(header) if header else None,
        archive_header_sha256=hashlib.sha256(header).hexdigest() if header else None,
    )
    key_path = to / meta.key_name if key_file else None
    meta_path = to / meta.meta_name
    try:
        if key_file is not None and key_path is not None:
            atomic_write_bytes(key_path, key_file, mode=0o600, exclusive=True)
        atomic_write_bytes(meta_path, sign_meta(meta, key), mode=0o644, exclusive=True)
    except BaseException:
        for p in (archive, key_path):
            if p is not None:
                _unlink(p)
        raise
    return Created(meta, archive, meta_path, key_path)


def _encrypt(
    produce: Callable[[IO[bytes]], Any], recipients: list[str], fd: int
) -> tuple[str, int, Any]:
    """``produce`` writes the tar in a thread into a pipe to an age child, which
    writes the archive straight into ``fd`` (the temp file, open for reading
    and writing); this thread follows the file as it grows, hashing what age
    wrote with ``pread`` and starting its write-back, so the three run at once
    and no ciphertext passes through this process on its way to the disk (a
    pipe back from age cost two copies of every byte and a wake-up a MiB).
    The producer's own error (a file that changed) wins over the broken pipe
    it causes; age's own error over an archive cut short.  Returns the
    archive's sha256 and size, and what ``produce`` returned."""
    tar = Worker(produce, "wb")
    try:
        child = AgeChild("encrypt", tar.outer.fileno(), recipients=recipients, stdout=fd)
    except BaseException as exc:
        tar.stop()
        if isinstance(exc, AgeChildError):
            raise _encrypt_failed(exc) from None
        raise
    tar.outer.close()  # the child holds the read end now
    try:
        digest = _follow(fd, child)
        child.wait()
    except BaseException as exc:
        child.stop()
        own = tar.stop()
        if own is not None:
            raise own from None
        if isinstance(exc, AgeChildError):
            raise _encrypt_failed(exc) from None
        raise
    return (*digest, tar.finish())


FOLLOW_WAIT = 0.001  # seconds between looks when the hash has caught up with age


def _follow(fd: int, child: AgeChild) -> tuple[str, int]:
    """sha256 and size of what the child writes into ``fd``, read behind it
    until it has exited and the file holds nothing more.  A write() below the
    file's size is complete (the size grows after the copy), so ``pread``
    never sees half a write."""
    sha = hashlib.sha256()
    buf = bytearray(PIPE_BYTES)
    view = memoryview(buf)
    writeback = Writeback(fd)
    size = 0
    exited = False
    while True:
        n = os.preadv(fd, [buf], size)
        if n:
            sha.update(view[:n])
            size += n
            writeback.wrote(n)
        elif exited:
            return sha.hexdigest(), size
        else:
            exited = child.proc.poll() is not None  # then read to the end once more
            if not exited:
                time.sleep(FOLLOW_WAIT)


def _age_header(fd: int) -> bytes | None:
    """The archive's age header, which the metadata signs so that restore can
    bind the archive's file key without hashing the whole archive again; None
    (restore then hashes it all) when it is longer than ``HEADER_MAX``."""
    prefix = os.pread(fd, HEADER_MAX, 0)
    size = header_size(prefix)
    return prefix[:size] if size else None


def _encrypt_failed(exc: AgeChildError) -> EncryptFailedError:
    return EncryptFailedError(
        "age could not encrypt the backup",
        field="-r",
        expected="recipients age encrypts to: age1... X25519 or ssh-ed25519 public keys",
        observed=f"{exc.kind}: {exc.message}",
        hint="check the -r/-R keys (age-keygen -y KEYFILE prints a key's recipient), "
        "or encrypt with --archive-passphrase-env VAR",
    )


def _check_space(to: Path, size: int) -> None:
    """Refuse before writing when the archive (about the files' size) cannot fit."""
    import shutil

    free = shutil.disk_usage(to).free
    if free < size:
        raise BackupInputError(
            "not enough free space for the backup",
            path=str(to),
            expected=f"at least {size} bytes free (the files' size)",
            observed=f"{free} bytes free",
            hint="free space or write the backup to another file system (--out)",
        )


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
