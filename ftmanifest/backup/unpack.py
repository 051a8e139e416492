"""Verify an archive against its metadata, then decrypt and judge it member by member.

Layer: judging rooms - edge (decrypts through an age child process, parses tar with the
stream reader in ``members``; never ``extractall``, never the extraction
filters).

The verdict has fixed parts, and ``read`` returns only when all of them
hold: the archive has the metadata's size (checked before anything is
decrypted) and sha256; the first member is the index, byte for byte the one
the metadata names, signed by a trusted key, about this backup; every later
member is a regular file or folder that the index lists, once, with the
index's size, and its bytes hash to the index's digest; every index entry
appears; after the end of the archive only zero padding follows; and age
authenticated the last chunk.  ``sink`` receives folders and file chunks as
they pass, only after the index was judged; it is told nothing is final
until ``read`` returns (restore writes into a private staging folder and
renames only then).

Which archive age decrypts is decided by its header: the metadata signs the
header's bytes (``Meta.archive_header_sha256``; the stanzas that wrap the
file key, and the header's MAC under that key), and they are checked before
age starts.  age then authenticates every payload chunk with that file key,
which only the backup's maker and the holders of its identities can derive,
and the index and every file's sha256 are checked against what was signed;
so an archive re-encrypted by someone who knows only a recipient, or
altered by someone who can write the backups folder, is refused, and what is
restored is the signed content whatever the storage holds.  The whole
archive's sha256 (what ``backup check`` verifies without a key) is not
computed when all of that holds: on two cores a second sha256 of every byte
cost a fifth of a restore.  When anything is refused it is computed, and
when it differs that is the refusal, whatever failed first.  Metadata
without a header (older backups, or a header over ``HEADER_MAX``) gets the
whole sha256 on another thread while age decrypts, from the very descriptor
age reads (``pread``, so the two cannot see two files).  A file the index
does not vouch for never reaches the sink, since nothing but the index and
what it lists is taken.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ftmanifest.backup.agechild import AgeChild, AgeChildError, header_size
from ftmanifest.backup.errors import (
    ArchiveDigestError,
    DecryptFailedError,
    MemberRefusedError,
    MetadataMismatchError,
    WrongIdentityError,
)
from ftmanifest.backup.members import Read, Sink, consume
from ftmanifest.backup.meta import Meta
from ftmanifest.backup.pipe import CHUNK, PIPE_BYTES
from ftmanifest.backup.tarstream import Truncated
from ftmanifest.errors import FtManifestError

__all__ = ["Read", "Sink", "hash_archive", "read_archive"]


def hash_archive(path: Path, meta: Meta) -> None:
    """Refuse unless ``path`` is the archive the metadata names, by sha256 and
    size, and its header is the one the metadata names (what restore checks)."""
    with _open_archive(path) as fh:
        _check_size(fh.fileno(), path, meta)
        _check_digest(_digest(fh.fileno()), path, meta)
        if meta.archive_header_sha256 is not None:
            _check_header(fh.fileno(), path, meta)


def _digest(fd: int, stop: threading.Event | None = None) -> tuple[str, int]:
    """sha256 and size of what ``fd`` holds, read with ``pread`` (its offset is
    left to whoever shares it); stops early, with a wrong size, on ``stop``."""
    sha = hashlib.sha256()
    buf = bytearray(PIPE_BYTES)
    view = memoryview(buf)
    size = 0
    while n := os.preadv(fd, [buf], size):
        sha.update(view[:n])
        size += n
        if stop is not None and stop.is_set():
            return "", -1
    return sha.hexdigest(), size


def _check_size(fd: int, path: Path, meta: Meta) -> None:
    size = os.fstat(fd).st_size
    if size != meta.archive_size:
        raise _digest_error(path, meta, f"{size} bytes")


def _check_digest(got: tuple[str, int], path: Path, meta: Meta) -> None:
    sha, size = got
    if sha != meta.archive_sha256 or size != meta.archive_size:
        raise _digest_error(path, meta, f"sha256:{sha} ({size} bytes)")


def _digest_error(path: Path, meta: Meta, observed: str) -> ArchiveDigestError:
    return ArchiveDigestError(
        "the encrypted file is not the one the signed metadata names "
        "(altered, truncated, swapped or replaced)",
        path=str(path),
        field="archive.sha256",
        expected=f"sha256:{meta.archive_sha256} ({meta.archive_size} bytes)",
        observed=observed,
        hint="restore from another copy of the backup; this one was changed after it was made",
    )


class _Hashing:
    """The archive's digest, computed on a thread from ``fd`` while age reads it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.stop = threading.Event()
        self.got: tuple[str, int] | None = None
        self.error: OSError | None = None
        self.thread = threading.Thread(target=self._run, name="ftmanifest-archive-sha256")
        self.thread.daemon = True
        self.thread.start()

    def _run(self) -> None:
        try:
            self.got = _digest(self.fd, self.stop)
        except OSError as exc:
            self.error = exc

    def result(self, path: Path) -> tuple[str, int]:
        self.thread.join()
        if self.error is not None:
            raise MetadataMismatchError(
                f"cannot read the archive: {self.error.strerror}",
                path=str(path),
                hint="check the disk and the file's permissions, then restore again",
            )
        assert self.got is not None
        return self.got

    def cancel(self) -> None:
        self.stop.set()
        self.thread.join()


def _open_archive(path: Path) -> IO[bytes]:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise MetadataMismatchError(
            "the archive named by the metadata is missing",
            path=str(path),
            hint="keep <id>.age beside <id>.meta.json under the names they were written with",
        ) from None
    except OSError as exc:
        raise MetadataMismatchError(
            f"cannot open the archive: {exc.strerror}", path=str(path)
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise MetadataMismatchError("the archive is not a regular file", path=str(path))
    return os.fdopen(fd, "rb", buffering=CHUNK)


def read_archive(
    archive: Path,
    meta: Meta,
    identities: Sequence[Any],
    *,
    trust: Any,
    sink: Sink | None = None,
    progress: Any = None,
    hashed: bool = False,
) -> Read:
    """Decrypt and judge every member; raise the first refusal.  ``progress``
    (a ``ProgressSink``) counts the files' bytes.

    age runs in a child process whose stdin is the descriptor opened here,
    and the header check (or the digest thread) reads that same descriptor:
    one inode.  A writer who changes the file after the header was read
    changes what age decrypts, which must still authenticate, hold the index
    the metadata names, signed by a trusted key, and every file's digest.
    ``hashed``: the caller has just checked the whole archive's sha256
    (``backup check --read-data``)."""
    if progress is not None:
        progress.add_total(meta.bytes)
    with _open_archive(archive) as fh:
        _check_size(fh.fileno(), archive, meta)
        if not hashed and meta.archive_header_sha256 is not None:
            # The header binds the file key; the whole sha256 only names a refusal's cause.
            try:
                _check_header(fh.fileno(), archive, meta)
                return _decrypt(fh.fileno(), archive, meta, identities, trust, sink, progress)
            except FtManifestError:
                _archive_differs(fh.fileno(), archive, meta)
                raise
        hashing = None if hashed else _Hashing(fh.fileno())  # hashed: the caller just did
        try:
            result = _decrypt(fh.fileno(), archive, meta, identities, trust, sink, progress)
        except BaseException as exc:
            if hashing is not None:
                if not isinstance(exc, FtManifestError):
                    hashing.cancel()  # an interrupt, or a disk error: no verdict needed
                    raise
                _check_digest(hashing.result(archive), archive, meta)  # the cause, if it differs
            raise
        if hashing is not None:
            _check_digest(hashing.result(archive), archive, meta)
    return result


def _archive_differs(fd: int, archive: Path, meta: Meta) -> None:
    """Raise the archive's own refusal when its sha256 is not the signed one;
    return when it is, or when it cannot be read (the first refusal stands)."""
    try:
        got = _digest(fd)
    except OSError:
        return
    _check_digest(got, archive, meta)


def _check_header(fd: int, archive: Path, meta: Meta) -> None:
    assert meta.archive_header_size is not None
    head = os.pread(fd, meta.archive_header_size, 0)
    got = hashlib.sha256(head).hexdigest()
    if got != meta.archive_header_sha256 or header_size(head) != len(head):
        raise ArchiveDigestError(
            "the archive's age header is not the one the signed metadata names "
            "(re-encrypted, or its recipients changed)",
            path=str(archive),
            field="archive.header.sha256",
            expected=f"sha256:{meta.archive_header_sha256} ({meta.archive_header_size} bytes)",
            observed=f"sha256:{got} ({len(head)} bytes)",
            hint="restore from another copy of the backup; this one was changed after it was made",
        )


def _decrypt(
    fd: int,
    archive: Path,
    meta: Meta,
    identities: Sequence[Any],
    trust: Any,
    sink: Sink | None,
    progress: Any,
) -> Read:
    child = AgeChild("decrypt", fd, identities=identities)
    result: Read | None = None
    assert child.stdout is not None
    try:
        result = consume(child.stdout, meta, trust, sink, str(archive), progress)
    except Truncated:
        pass
    except BaseException:
        child.stop()
        raise
    try:
        child.wait()
    except AgeChildError as exc:
        raise _decrypt_refusal(exc, archive) from None
    if result is None:  # age authenticated every chunk, yet the tar stops short
        raise MemberRefusedError(
            "the archive's tar stream ends before its end-of-archive blocks",
            path=str(archive),
            hint="the archive was not written by ftmanifest backup; do not restore it",
        )
    return result


def _decrypt_refusal(exc: AgeChildError, archive: Path) -> Exception:
    text = str(exc)
    if exc.wrong_key:
        return WrongIdentityError(
            "none of the given identities can open this backup",
            path=str(archive),
            expected="an identity whose public key is one of the backup's recipients",
            observed="no matching key",
            hint="pass -i with the key the backup was encrypted to (see its .meta.json recipients)",
        )
    return DecryptFailedError(
        "the encrypted data does not authenticate: altered, truncated or reordered chunks",
        path=str(archive),
        observed=text[:200],
        hint="restore from another copy of the backup; nothing was written",
    )
