"""The members of an archive's tar stream, judged one by one against its signed index.

Layer: judging rooms - edge (hashes, hands folders and file chunks to a sink; the tar
headers come from ``tarstream``, never ``tarfile``, never ``extractall``).  ``consume``
is what ``unpack.read_archive`` runs on the age child's output: the first member must be
the index the metadata names, signed by a trusted key, about this backup; every later
member a regular file or folder the index lists, once, with its size; every entry
present; then (backups since the index stopped holding them) the files' sha256 as the
last member, which must be what the signed metadata names and what each file's bytes
hashed to, the members having come in the index's order; only zero padding after the
end.  A stream that ends early raises ``tarstream.Truncated`` (the caller asks age why).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import IO, Any, Protocol

from ftmanifest.backup.errors import (
    IndexMismatchError,
    MemberRefusedError,
    MetadataMismatchError,
)
from ftmanifest.backup.index import (
    DIGEST_BYTES,
    DIGESTS_MEMBER,
    INDEX_MAX_BYTES,
    INDEX_MEMBER,
    PAGE_MEMBER,
    PREDICATE_TYPE,
    Entry,
    check_member_name,
    entries_digest,
)
from ftmanifest.backup.index_read import (
    check_no_file_is_a_folder,
    page_entries,
    parse_entries,
    parse_pages,
)
from ftmanifest.backup.meta import Meta
from ftmanifest.backup.tarstream import (
    MEMBER_READ,
    Malformed,
    TarMember,
    TarStream,
    Truncated,
    kind_words,
    read_header,
)
from ftmanifest.signing.attest import verify_envelope
from ftmanifest.signing.dsse import parse_envelope
from ftmanifest.signing.intoto import Expect


class Sink(Protocol):
    def folder(self, entry: Entry) -> None: ...

    def open(self, entry: Entry) -> Any: ...  # an object with claim, commit and close


@dataclass(frozen=True)
class Read:
    entries: tuple[Entry, ...]
    signers: tuple[str, ...]  # who signed the index


def consume(
    stream: IO[bytes], meta: Meta, trust: Any, sink: Sink | None, where: str, progress: Any
) -> Read:
    tar = TarStream(stream)
    try:
        return _members(tar, meta, trust, sink, where, progress)
    except Malformed as exc:
        raise _not_tar(str(exc), where) from None


def _not_tar(what: str, where: str) -> MemberRefusedError:
    return MemberRefusedError(
        f"the archive holds a malformed tar header: {what}",
        path=where,
        field="member",
        expected="POSIX ustar or pax headers, as ftmanifest backup writes them",
        observed=what,
        hint="the archive was not written by ftmanifest backup; do not restore it",
    )


def _members(
    tar: TarStream, meta: Meta, trust: Any, sink: Sink | None, where: str, progress: Any
) -> Read:
    first = read_header(tar)
    if first is None:
        raise _no_index(where)
    entries, signers, after = _index(tar, first, meta, trust, where)
    _agree(entries, meta, where)
    by_path = {e.path: e for e in entries}
    seen: set[str] = set()
    observed = bytearray()  # the files' sha256 in member order, when they follow the files
    while (member := read_header(tar)) is not None:
        if after and member.name == DIGESTS_MEMBER:
            _all_present(by_path, seen, where)
            _file_digests(tar, member, entries, observed, meta, where)
            if (late := read_header(tar)) is not None:
                raise MemberRefusedError(
                    f"a member follows {DIGESTS_MEMBER}, the archive's last",
                    path=where,
                    field="member",
                    expected="the end of the archive",
                    observed=repr(late.name[:200]),
                    hint="the archive was not written by ftmanifest backup; do not restore it",
                )
            break
        entry = _judge(member, by_path, seen, where)
        if after and entry is not entries[len(seen) - 1]:
            raise MemberRefusedError(
                f"archive member {entry.path!r} is out of the signed index's order",
                path=where,
                field="member",
                expected=repr(entries[len(seen) - 1].path),
                observed=repr(entry.path),
                hint="the archive was not written by ftmanifest backup; do not restore it",
            )
        if entry.type == "dir":
            if sink:
                sink.folder(entry)
            continue
        observed += _copy(tar, entry, sink, where, progress)
        tar.skip_padding(entry.size)
    else:
        _all_present(by_path, seen, where)
        if after:
            raise IndexMismatchError(
                "the archive ends without its files' digests",
                path=where,
                field="file_digests",
                expected=f"a last member {DIGESTS_MEMBER}",
                observed="the end of the archive",
                hint="the archive is incomplete; restore from another copy",
            )
    if not tar.all_zero_to_end():
        raise MemberRefusedError(
            "data follows the end of the tar archive",
            path=where,
            hint="the archive was not written by ftmanifest backup; do not restore it",
        )
    return Read(tuple(entries), signers)


def _all_present(by_path: dict[str, Entry], seen: set[str], where: str) -> None:
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


def _file_digests(
    tar: TarStream,
    member: TarMember,
    entries: list[Entry],
    observed: bytearray,
    meta: Meta,
    where: str,
) -> None:
    """The archive's last member, the files' sha256 in the index's order: its
    own sha256 must be the one the signed metadata names, and each digest the
    one its file's bytes had."""
    if member.kind != b"0" or member.sparse or member.size != len(observed):
        raise IndexMismatchError(
            f"{DIGESTS_MEMBER} is not the list of the files' digests",
            path=where,
            field="file_digests",
            expected=f"a regular file of {len(observed)} bytes ({DIGEST_BYTES} a file)",
            observed=f"{kind_words(member)} of {member.size} bytes",
            hint="the archive is hostile or damaged; nothing was written",
        )
    sha = hashlib.sha256()
    bad: tuple[int, str] | None = None  # the first file whose digest differs, and the signed one
    at = 0
    while at < member.size:  # chunks of whole digests: MEMBER_READ is a multiple of 32
        chunk = tar.exactly(min(MEMBER_READ, member.size - at))
        sha.update(chunk)
        if bad is None and chunk != observed[at : at + len(chunk)]:
            for off in range(0, len(chunk), DIGEST_BYTES):
                signed = chunk[off : off + DIGEST_BYTES]
                if signed != observed[at + off : at + off + DIGEST_BYTES]:
                    bad = ((at + off) // DIGEST_BYTES, signed.hex())
                    break
        at += len(chunk)
    tar.skip_padding(member.size)
    if sha.hexdigest() != meta.file_digests_sha256:
        raise IndexMismatchError(
            "the files' digests in the archive are not the ones the metadata names",
            path=where,
            field="file_digests_sha256",
            expected=f"sha256:{meta.file_digests_sha256}",
            observed=f"sha256:{sha.hexdigest()}",
            hint="the archive and its metadata do not belong together",
        )
    if bad is not None:
        number, signed_hex = bad
        entry = [e for e in entries if e.type == "file"][number]
        got = observed[number * DIGEST_BYTES : (number + 1) * DIGEST_BYTES].hex()
        raise _digest_differs(entry, signed_hex, got, where)


def _no_index(where: str) -> IndexMismatchError:
    return IndexMismatchError(
        "the archive does not start with its signed index",
        path=where,
        expected=f"a first member {INDEX_MEMBER}",
        observed="an empty tar archive",
        hint="the archive was not written by ftmanifest backup; do not restore it",
    )


def _index(
    tar: TarStream, first: TarMember, meta: Meta, trust: Any, where: str
) -> tuple[list[Entry], tuple[str, ...], bool]:
    """The signed index's entries, its signers, and whether the files' digests
    follow the files (``DIGESTS_MEMBER``) rather than sit in the entries."""
    is_file = first.kind == b"0" and not first.sparse
    if first.name != INDEX_MEMBER or not is_file or first.size > INDEX_MAX_BYTES:
        raise IndexMismatchError(
            "the archive does not start with its signed index",
            path=where,
            expected=f"a first member {INDEX_MEMBER} of at most {INDEX_MAX_BYTES} bytes",
            observed=f"{first.name!r} ({kind_words(first)}, {first.size} bytes)",
            hint="the archive was not written by ftmanifest backup; do not restore it",
        )
    raw = tar.exactly(first.size)
    tar.skip_padding(first.size)
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
    after = _digests_after(p, meta, where)
    if "pages" in p:
        entries, digest = _paged(tar, p, where, after)
    else:
        entries = parse_entries(p.get("entries"), where, digests_after=after)
        digest = entries_digest(entries)
    subject = verified.subjects[0]
    if subject.name != meta.backup_id or subject.digest.get("sha256") != digest:
        raise IndexMismatchError("the index's subject does not match its entries", path=where)
    return entries, verified.verdict.valid_keyids, after


def _digests_after(predicate: dict[str, Any], meta: Meta, where: str) -> bool:
    """Whether the signed index says the files' digests follow the files; the
    signed metadata must then name them, and must not otherwise."""
    said = predicate.get("file_digests")
    if said not in (None, DIGESTS_MEMBER):
        raise IndexMismatchError(
            "the signed index is malformed: file_digests names another member",
            path=where,
            field="file_digests",
            expected=DIGESTS_MEMBER,
            observed=repr(said)[:200],
            hint="the backup was not written by this ftmanifest; do not restore it",
        )
    after = said is not None
    if after != (meta.file_digests_sha256 is not None):
        raise MetadataMismatchError(
            "the signed metadata and the signed index disagree on where the files' digests are",
            path=where,
            field="file_digests_sha256",
            expected="a sha256 of the digests member" if after else "none (the index holds them)",
            observed=meta.file_digests_sha256 or "none",
            hint="the metadata describes another backup; do not restore this one",
        )
    return after


def _agree(entries: list[Entry], meta: Meta, where: str) -> None:
    """The metadata's file count and bytes (what ``backup list`` shows and the
    free-space check reads) must be the index's (what is restored)."""
    files = sum(1 for e in entries if e.type == "file")
    size = sum(e.size for e in entries)
    for field, said, listed in (("files", meta.files, files), ("bytes", meta.bytes, size)):
        if said != listed:
            raise MetadataMismatchError(
                f"the signed metadata and the signed index disagree on the backup's {field}",
                path=where,
                field=field,
                expected=f"{listed} (the index)",
                observed=f"{said} (the metadata)",
                hint="the metadata describes another backup; do not restore this one",
            )


def _paged(
    tar: TarStream, predicate: dict[str, Any], where: str, after: bool
) -> tuple[list[Entry], str]:
    """The entries of a paged index: each page the next member, by name, read
    whole and checked against its signed size and digest before it is parsed."""
    pages = parse_pages(predicate, where)
    whole = hashlib.sha256()
    entries: list[Entry] = []
    seen: set[str] = set()
    for number, page in enumerate(pages, 1):
        name = PAGE_MEMBER.format(number)
        member = read_header(tar)
        if member is None or member.name != name or member.kind != b"0" or member.sparse:
            observed = "the end of the archive" if member is None else repr(member.name)
            raise IndexMismatchError(
                f"page {number} of the signed index is missing",
                path=where,
                field=f"pages[{number - 1}]",
                expected=f"the member {name} after the index",
                observed=observed,
                hint="the archive is hostile or damaged; nothing was written",
            )
        if member.size != page.size:
            raise IndexMismatchError(
                f"page {number} of the index has another size than the signed index says",
                path=where,
                field=f"pages[{number - 1}].size",
                expected=str(page.size),
                observed=str(member.size),
                hint="the archive is hostile or damaged; nothing was written",
            )
        raw = tar.exactly(page.size)
        tar.skip_padding(page.size)
        items = page_entries(raw, page, number, where)
        whole.update(raw)
        entries.extend(
            parse_entries(
                items, where, seen=seen, start=len(entries), whole=False, digests_after=after
            )
        )
    check_no_file_is_a_folder(entries, where)
    return entries, whole.hexdigest()


def _judge(member: TarMember, by_path: dict[str, Entry], seen: set[str], where: str) -> Entry:
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
    if member.kind not in (b"0", b"5") or member.sparse:
        kind = kind_words(member)
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
    if entry is None or entry.type != ("dir" if member.kind == b"5" else "file"):
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


def _copy(tar: TarStream, entry: Entry, sink: Sink | None, where: str, progress: Any) -> bytes:
    """A file member's bytes into the sink; their sha256, which must be the
    index's where the index holds it (older backups)."""
    out = sink.open(entry) if sink else tar.discard
    sha = hashlib.sha256()
    left = entry.size
    try:
        while left:
            view = out.claim(min(left, MEMBER_READ))
            n = tar.readinto(view)
            if not n:
                raise Truncated()
            sha.update(view[:n])
            out.commit(n)
            left -= n
            if progress is not None:
                progress.advance(n)
    finally:
        out.close()
    if entry.sha256 and sha.hexdigest() != entry.sha256:
        raise _digest_differs(entry, entry.sha256, sha.hexdigest(), where)
    return sha.digest()


def _digest_differs(entry: Entry, signed: str, got: str, where: str) -> IndexMismatchError:
    return IndexMismatchError(
        f"archive member {entry.path!r} does not have the digest the backup signed",
        path=where,
        field="sha256",
        expected=f"sha256:{signed}",
        observed=f"sha256:{got}",
        hint="the archive is damaged; nothing was written",
    )
