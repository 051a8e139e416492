"""Verify an archive against its metadata, then decrypt and judge it member by member.

Layer: edge (decrypts through an age child process, parses tar with the
stream reader in ``members``; never ``extractall``, never the extraction
filters).

The order is fixed: the archive's sha256 must be the metadata's before
anything is decrypted; the first member must be the index, byte for byte the
one the metadata names, signed by a trusted key, about this backup; every
later member must be a regular file or folder that the index lists, once,
with the index's size, and its bytes must hash to the index's digest; every
index entry must appear; after the end of the archive only zero padding may
follow; and age must authenticate the last chunk.  ``sink`` receives folders
and file chunks as they pass; it is told nothing is final until ``read``
returns (restore writes into a staging folder and renames only then).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ftmanifest.backup.agechild import AgeChild, AgeChildError
from ftmanifest.backup.errors import (
    ArchiveDigestError,
    DecryptFailedError,
    MemberRefusedError,
    MetadataMismatchError,
    WrongIdentityError,
)
from ftmanifest.backup.members import Read, Sink, Truncated, consume
from ftmanifest.backup.meta import Meta
from ftmanifest.backup.pipe import CHUNK

__all__ = ["Read", "Sink", "hash_archive", "read_archive"]


def hash_archive(path: Path, meta: Meta) -> None:
    """Refuse unless ``path`` is the archive the metadata names, by sha256 and size."""
    sha = hashlib.sha256()
    size = 0
    with _open_archive(path) as fh:
        while chunk := fh.read(CHUNK):
            sha.update(chunk)
            size += len(chunk)
    if sha.hexdigest() != meta.archive_sha256 or size != meta.archive_size:
        raise ArchiveDigestError(
            "the encrypted file is not the one the signed metadata names "
            "(altered, truncated, swapped or replaced)",
            path=str(path),
            field="archive.sha256",
            expected=f"sha256:{meta.archive_sha256} ({meta.archive_size} bytes)",
            observed=f"sha256:{sha.hexdigest()} ({size} bytes)",
            hint="restore from another copy of the backup; this one was changed after it was made",
        )


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

    age runs in a child process reading the archive through a descriptor
    opened here, after the whole file hashed to the metadata's digest; the
    child reopens that same inode.  The file is not hashed a second time:
    whatever a writer could change in between must still decrypt, hold the
    index the metadata names signed by a trusted key, and every file's
    digest, which is what is judged next."""
    if not hashed:  # the caller just did (backup check)
        hash_archive(archive, meta)
    if progress is not None:
        progress.add_total(meta.bytes)
    with _open_archive(archive) as fh:
        child = AgeChild("decrypt", fh.fileno(), identities=identities)
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
