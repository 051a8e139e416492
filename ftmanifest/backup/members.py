"""The tar stream inside an archive, member by member, against its signed index.

Layer: edge (parses tar with the standard library's stream reader, hashes,
hands folders and file chunks to a sink; never ``extractall``, never the
extraction filters).  ``consume`` is what ``unpack.read_archive`` runs on the
age child's output: the first member must be the index the metadata names,
signed by a trusted key, about this backup; every later member a regular
file or folder the index lists, once, with its size and sha256; every entry
present; only zero padding after the end.  A stream that ends early raises
``Truncated`` (the caller asks age why).
"""

from __future__ import annotations

import hashlib
import tarfile
from dataclasses import dataclass
from typing import IO, Any, Protocol

from ftmanifest.backup.errors import (
    IndexMismatchError,
    MemberRefusedError,
    MetadataMismatchError,
)
from ftmanifest.backup.index import (
    INDEX_MAX_BYTES,
    INDEX_MEMBER,
    PREDICATE_TYPE,
    Entry,
    check_member_name,
    entries_digest,
    parse_entries,
)
from ftmanifest.backup.meta import Meta
from ftmanifest.backup.pipe import CHUNK, PIPE_BYTES
from ftmanifest.errors import FtManifestError

# A member's bytes are taken 1 MiB at a time (tarfile joins its 64 KiB reads
# into one copy): a sixteenth of the per-chunk Python work of hashing and
# handing each chunk to the writer thread.
MEMBER_READ = PIPE_BYTES

_TYPE_WORDS = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.CONTTYPE: "a contiguous file",
    tarfile.GNUTYPE_SPARSE: "a GNU sparse file",
}


class Sink(Protocol):
    def folder(self, entry: Entry) -> None: ...

    def open(self, entry: Entry) -> Any: ...  # an object with write(bytes) and close()


@dataclass(frozen=True)
class Read:
    entries: tuple[Entry, ...]
    signers: tuple[str, ...]  # who signed the index


class Truncated(Exception):
    """The tar stream ended early: a consequence of a failed decryption."""


class _Tail:
    """A reader that remembers its last few chunks and where they started, so
    the bytes after the tar's end (some already in tarfile's own buffer) can
    be judged without relying on tarfile's internals."""

    KEEP = 4

    def __init__(self, source: IO[bytes]) -> None:
        self.source = source
        self.pos = 0
        self.chunks: list[tuple[int, bytes]] = []

    def read(self, n: int = -1) -> bytes:
        data = self.source.read(n)
        if data:
            self.chunks.append((self.pos, data))
            del self.chunks[: -self.KEEP]
            self.pos += len(data)
        return data

    def after(self, offset: int) -> bytes | None:
        """Bytes read from ``offset`` on, or None when no longer kept."""
        if not self.chunks or self.chunks[0][0] > offset:
            return None if self.pos > offset else b""
        return b"".join(d for _, d in self.chunks)[offset - self.chunks[0][0] :]


def consume(
    stream: IO[bytes], meta: Meta, trust: Any, sink: Sink | None, where: str, progress: Any
) -> Read:
    stream = _Tail(stream)  # type: ignore[assignment]
    try:
        tar = tarfile.open(fileobj=stream, mode="r|", bufsize=CHUNK)  # noqa: SIM115
    except tarfile.ReadError:
        raise Truncated() from None
    try:
        return _members(tar, stream, meta, trust, sink, where, progress)
    except FtManifestError:
        raise
    except (tarfile.ReadError, EOFError) as exc:
        if "unexpected end" in str(exc) or isinstance(exc, EOFError) or "empty" in str(exc):
            raise Truncated() from None
        raise _not_tar(exc, where) from None
    except (tarfile.TarError, ValueError, OverflowError, IndexError, KeyError) as exc:
        # tarfile's own parsers (sparse maps, PAX records, numbers) raise these
        # on malformed headers
        raise _not_tar(exc, where) from None


def _not_tar(exc: BaseException, where: str) -> MemberRefusedError:
    return MemberRefusedError(
        f"the archive holds a malformed tar header: {type(exc).__name__}: {str(exc)[:120]}",
        path=where,
        hint="the archive was not written by ftmanifest backup; do not restore it",
    )


def _members(
    tar: tarfile.TarFile,
    stream: IO[bytes],
    meta: Meta,
    trust: Any,
    sink: Sink | None,
    where: str,
    progress: Any,
) -> Read:
    first = tar.next()
    if first is None:
        raise Truncated()
    entries, signers = _index(tar, first, meta, trust, where)
    by_path = {e.path: e for e in entries}
    seen: set[str] = set()
    while (member := tar.next()) is not None:
        entry = _judge(member, by_path, seen, where)
        if entry.type == "dir":
            if sink:
                sink.folder(entry)
            continue
        _copy(tar, member, entry, sink, where, progress)
    missing = [p for p in by_path if p not in seen]
    if missing:
        raise IndexMismatchError(
            f"{len(missing)} file(s) of the signed index are not in the archive",
            path=where,
            field="entries",
            expected="every entry of the index",
            observed="missing: " + ", ".join(missing[:5]),
            hint="the archive is incomplete; restore from another copy",
        )
    _only_zeros_after(tar, stream, where)
    return Read(tuple(entries), signers)


def _only_zeros_after(tar: tarfile.TarFile, stream: IO[bytes], where: str) -> None:
    """Everything from the end-of-archive block on must be zero padding."""
    assert isinstance(stream, _Tail)
    seen = stream.after(tar.offset)
    bad = seen is None or seen.count(0) != len(seen)
    while not bad and (rest := stream.read(CHUNK)):
        bad = rest.count(0) != len(rest)
    if bad:
        raise MemberRefusedError(
            "data follows the end of the tar archive",
            path=where,
            hint="the archive was not written by ftmanifest backup; do not restore it",
        )


def _index(
    tar: tarfile.TarFile, first: tarfile.TarInfo, meta: Meta, trust: Any, where: str
) -> tuple[list[Entry], tuple[str, ...]]:
    from ftmanifest.signing.attest import verify_envelope
    from ftmanifest.signing.dsse import parse_envelope
    from ftmanifest.signing.intoto import Expect

    if first.name != INDEX_MEMBER or not first.isreg() or first.size > INDEX_MAX_BYTES:
        raise IndexMismatchError(
            "the archive does not start with its signed index",
            path=where,
            expected=f"a first member {INDEX_MEMBER} of at most {INDEX_MAX_BYTES} bytes",
            observed=f"{first.name!r} ({first.size} bytes)",
            hint="the archive was not written by ftmanifest backup; do not restore it",
        )
    fh = tar.extractfile(first)
    raw = fh.read() if fh else b""
    if len(raw) != first.size:
        raise Truncated()
    if hashlib.sha256(raw).hexdigest() != meta.index_sha256:
        raise IndexMismatchError(
            "the index inside the archive is not the one the metadata names",
            path=where,
            field="index_sha256",
            expected=f"sha256:{meta.index_sha256}",
            observed=f"sha256:{hashlib.sha256(raw).hexdigest()}",
            hint="the archive and its metadata do not belong together",
        )
    envelope = parse_envelope(raw, f"{where}!{INDEX_MEMBER}")
    expect = Expect(PREDICATE_TYPE, 1, "the index was not written by ftmanifest backup")
    verified = verify_envelope(envelope, trust=trust, expect=expect, path=f"{where}!{INDEX_MEMBER}")
    p = verified.predicate
    for name in ("backup_id", "kind", "experiment_id", "manifest_digest"):
        if p.get(name) != getattr(meta, name):
            raise MetadataMismatchError(
                f"the signed index belongs to another backup ({name} differs)",
                path=where,
                field=name,
                expected=str(getattr(meta, name)),
                observed=str(p.get(name)),
                hint="the archive and its metadata do not belong together",
            )
    entries = parse_entries(p.get("entries"), where)
    subject = verified.subjects[0]
    if subject.name != meta.backup_id or subject.digest.get("sha256") != entries_digest(entries):
        raise IndexMismatchError("the index's subject does not match its entries", path=where)
    return entries, verified.verdict.valid_keyids


def _judge(member: tarfile.TarInfo, by_path: dict[str, Entry], seen: set[str], where: str) -> Entry:
    name = member.name
    problem = check_member_name(name)
    if problem:
        raise MemberRefusedError(
            f"archive member with {problem}: {name[:200]!r}",
            path=where,
            field="member",
            expected="a relative path inside the backup",
            observed=name[:200],
            hint="the archive is hostile or damaged; nothing was written",
        )
    if not (member.isreg() or member.isdir()) or member.sparse is not None:
        kind = "a sparse file" if member.sparse is not None else None
        kind = kind or _TYPE_WORDS.get(member.type, f"type {member.type!r}")
        raise MemberRefusedError(
            f"archive member {name!r} is {kind}; only regular files and folders are restored",
            path=where,
            field="member",
            expected="a regular file or folder",
            observed=kind,
            hint="the archive is hostile or damaged; nothing was written",
        )
    if name in seen:
        raise MemberRefusedError(
            f"archive member {name!r} appears twice",
            path=where,
            field="member",
            hint="the archive is hostile or damaged; nothing was written",
        )
    entry = by_path.get(name)
    if entry is None or entry.type != ("dir" if member.isdir() else "file"):
        raise IndexMismatchError(
            f"archive member {name!r} is not in the signed index",
            path=where,
            field="member",
            expected="only members the index lists",
            observed=name,
            hint="the archive is hostile or damaged; nothing was written",
        )
    if entry.type == "file" and member.size != entry.size:
        raise IndexMismatchError(
            f"archive member {name!r} has another size than the index says",
            path=where,
            field="size",
            expected=str(entry.size),
            observed=str(member.size),
        )
    seen.add(name)
    return entry


def _copy(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    entry: Entry,
    sink: Sink | None,
    where: str,
    progress: Any,
) -> None:
    data = tar.extractfile(member)
    if data is None:  # pragma: no cover - regular members always have data
        raise Truncated()
    out = sink.open(entry) if sink else None
    sha = hashlib.sha256()
    left = entry.size
    try:
        while left:
            chunk = data.read(min(MEMBER_READ, left))
            if not chunk:
                raise Truncated()
            sha.update(chunk)
            if out is not None:
                out.write(chunk)
            left -= len(chunk)
            if progress is not None:
                progress.advance(len(chunk))
    finally:
        if out is not None:
            out.close()
    if sha.hexdigest() != entry.sha256:
        raise IndexMismatchError(
            f"archive member {entry.path!r} does not have the index's digest",
            path=where,
            field="sha256",
            expected=f"sha256:{entry.sha256}",
            observed=f"sha256:{sha.hexdigest()}",
            hint="the archive is damaged; nothing was written",
        )
