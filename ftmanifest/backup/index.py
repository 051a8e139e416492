"""The signed index: every file and folder of a backup, the archive's first member.

Layer: judging rooms - edge (walks the paths to back up) and signing client.

An entry is ``{"path", "type": "file"|"dir", "mode": "0644", "size",
"mtime"}``; paths are '/'-separated, relative, NFC as the file system gave
them, one top-level name per path given on the command line.  The index is a
DSSE/in-toto statement of type ``PREDICATE_TYPE``: its one subject is the
backup id with the sha256 of the canonical entry list, its predicate the
backup id, creation time, kind, experiment, ``"file_digests":
DIGESTS_MEMBER`` and the entries.

The files' sha256 are not in the index: each is taken while the file is
archived (so a backup reads every file once), and the archive's last member,
``DIGESTS_MEMBER``, holds them, 32 bytes a file in the index's order; the
signed metadata names that member's sha256 (``file_digests_sha256``), and the
archive members follow the index's order exactly.  An index without
``file_digests`` (older backups) holds each file's ``sha256`` itself.

A backup of more than ``PAGE_ENTRIES`` entries (or ``PAGE_BYTES`` of them)
lists them in pages instead: the signed predicate holds ``entry_count`` and
``pages``, each page's entry count, size and sha256, and no ``entries``; the
pages follow the index as members ``ftmanifest-index-000001.json`` ...  (each
the canonical JSON list of its entries, read whole and checked against its
signed digest before it is parsed), and the subject's digest is the sha256 of
the pages' bytes in order.  So the signed index stays small, no document read
whole grows with the backup, and every entry is still vouched for by the one
signature before any file member is read.

Only regular files and folders are backed up.  A symlink, FIFO, socket or
device among them is refused (restore would refuse them anyway), as is a name
that is not valid UTF-8 or that holds a control character.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.backup.errors import SourceChangedError, UnsupportedSourceError
from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.manifest.canonical import canonical_json
from ftmanifest.signing.attest import sign_statement
from ftmanifest.signing.intoto import Subject

PREDICATE_TYPE = "https://ftmanifest.dev/backup-index/v1"
INDEX_MEMBER = "ftmanifest-index.dsse.json"
INDEX_MAX_BYTES = 64 << 20
MAX_ENTRIES = 10_000_000
PAGE_MEMBER = "ftmanifest-index-{:06d}.json"
PAGE_PREFIX = "ftmanifest-index"  # no top-level name of a backup may start so
PAGE_ENTRIES = 50_000  # entries a page at most
PAGE_BYTES = 16 << 20  # a page's JSON at most (a page holds at least one entry)
PAGE_MAX_BYTES = 32 << 20  # what a reader takes for one page
DIGESTS_MEMBER = "ftmanifest-index-digests.bin"  # the files' sha256, after the last file
DIGEST_BYTES = 32
NAME_MAX_BYTES = 255  # NAME_MAX of Linux, macOS and Windows file systems


@dataclass(frozen=True)
class Entry:
    path: str
    type: str  # "file" | "dir"
    mode: int  # permission bits only (& 0o777)
    size: int = 0
    sha256: str = ""  # hex, files only
    mtime: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "type": self.type, "mode": f"{self.mode:04o}"}
        if self.type == "file":
            out["size"] = self.size
            if self.sha256:  # an index of older backups; new ones sign them after the files
                out["sha256"] = self.sha256
            out["mtime"] = self.mtime
        return out


@dataclass(frozen=True)
class Source:
    """A file to back up: where it is and what it was when hashed."""

    entry: Entry
    path: str
    identity: tuple[int, int, int, int, int]  # dev, ino, size, mtime_ns, ctime_ns


def stat_identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def check_member_name(name: str) -> str | None:
    """Why ``name`` cannot be a member path, or None."""
    if not name or name.startswith("/") or "\\" in name:
        return "an absolute path or one with backslashes"
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "an empty, '.' or '..' path component"
    if _CONTROL.search(name):
        return "a control character"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "bytes that are not UTF-8"
    return None


def collect(paths: Sequence[Path]) -> tuple[list[Entry], list[tuple[str, str, os.stat_result]]]:
    """Walk ``paths``: the folder entries and the files (member name, path,
    lstat), each folder before what it holds."""
    tops: dict[str, Path] = {}
    dirs: list[Entry] = []
    files: list[tuple[str, str, os.stat_result]] = []
    for given in paths:
        name = os.path.basename(os.path.normpath(os.path.abspath(given)))
        if name in tops:
            raise InputError(
                f"two paths have the same name {name!r} at the top of the backup",
                path=str(given),
                expected="distinct last path components",
                observed=f"{tops[name]} and {given}",
                hint="back them up separately, or copy one under another name",
            )
        if name.startswith(PAGE_PREFIX):
            raise InputError(
                f"{name} starts as the names of the backup's own index members",
                path=str(given),
                expected=f"a top-level name that does not start with {PAGE_PREFIX!r}",
                observed=name,
                hint="back up the folder that holds it, or rename it",
            )
        tops[name] = given
        _walk(os.fspath(given), name, _lstat(os.fspath(given)), dirs, files)
    count = len(dirs) + len(files)
    if count > MAX_ENTRIES:
        raise InputError(
            f"more than {MAX_ENTRIES} files and folders in one backup",
            path=str(paths[0]) if paths else None,
            expected=f"at most {MAX_ENTRIES} files and folders",
            observed=str(count),
            hint=_FEWER,
        )
    return dirs, files


_FEWER = (
    "back up fewer files at a time (one backup per folder), or pack many small files into "
    "one archive file (tar, zip) and back that up"
)


def check_index_size(index: Index, count: int, paths: Sequence[Path]) -> None:
    """Refuse an index, or a page of it, that restore and ``backup check`` would
    refuse to read (only a single entry of many MiB can make one)."""
    if len(index.head) > INDEX_MAX_BYTES:
        raise index_too_large(len(index.head), INDEX_MAX_BYTES, "signed index", count, paths)
    for page in index.pages:
        if len(page) > PAGE_MAX_BYTES:
            raise index_too_large(len(page), PAGE_MAX_BYTES, "index page", count, paths)


def index_too_large(
    size: int, limit: int, what: str, count: int, paths: Sequence[Path]
) -> InputError:
    return InputError(
        f"the backup's {what} would be {size / 2**20:.1f} MiB, more than restore and "
        f"backup check read ({limit >> 20} MiB): nothing was written",
        path=str(paths[0]) if paths else None,
        field="index",
        expected=f"an {what} of at most {limit} bytes",
        observed=f"{size} bytes for {count} files and folders",
        hint="shorten the longest paths, or back up fewer files at a time",
    )


def _lstat(path: str) -> os.stat_result:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        raise InputNotFoundError("path to back up not found", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None


def _walk(
    path: str,
    name: str,
    st: os.stat_result,
    dirs: list[Entry],
    files: list[tuple[str, str, os.stat_result]],
) -> None:
    """One path already lstat'ed, and below it: plain strings and ``os.scandir``
    (its entries' lstat), no ``Path`` a file (a third of a large backup's walk)."""
    problem = check_member_name(name)
    if problem:
        raise UnsupportedSourceError(
            f"cannot back up a name with {problem}",
            path=path,
            hint="rename the file",
        )
    if stat.S_ISREG(st.st_mode):
        files.append((name, path, st))
    elif stat.S_ISDIR(st.st_mode):
        dirs.append(Entry(name, "dir", st.st_mode & 0o777))
        try:
            with os.scandir(path) as listing:
                children = [(c.name, c.path, _child_stat(c)) for c in listing]
        except OSError as exc:
            raise InputError(f"cannot list the folder: {exc.strerror}", path=path) from None
        children.sort(key=lambda c: c[0].encode("utf-8", "surrogateescape"))
        for child, child_path, child_st in children:
            _walk(child_path, f"{name}/{child}", child_st, dirs, files)
    else:
        raise UnsupportedSourceError(
            f"cannot back up {_kind(st.st_mode)}: only regular files and folders",
            path=path,
            expected="a regular file or a folder",
            observed=_kind(st.st_mode),
            hint="back up the link's target itself, or remove it from the folder",
        )


def _child_stat(child: os.DirEntry[str]) -> os.stat_result:
    try:
        return child.stat(follow_symlinks=False)
    except FileNotFoundError:
        raise InputNotFoundError(
            "a file disappeared while the folder was listed", path=child.path
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=child.path) from None


def _kind(mode: int) -> str:
    for test, word in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return word
    return "a special file"


def build(paths: Sequence[Path]) -> tuple[list[Entry], list[Source]]:
    """Every entry in member order, and the files with the stat the walk saw;
    refused before anything is read when there are more than ``MAX_ENTRIES``.
    No file is read here: its sha256 is taken while it is archived and signed
    after the last file (``DIGESTS_MEMBER``)."""
    dirs, files = collect(paths)
    entries: list[Entry] = list(dirs)
    sources: list[Source] = []
    for name, p, st in files:
        entry = Entry(name, "file", st.st_mode & 0o777, st.st_size, "", int(st.st_mtime))
        entries.append(entry)
        sources.append(Source(entry, p, stat_identity(st)))
    entries.sort(key=lambda e: e.path.encode("utf-8"))
    order = {e.path: i for i, e in enumerate(entries)}
    sources.sort(key=lambda s: order[s.entry.path])
    return entries, sources


def _changed(path: str | Path, when: str, observed: str | None = None) -> Exception:
    return SourceChangedError(
        f"the file changed {when}; it was not backed up half-captured",
        path=str(path),
        expected="the same size and times from the walk to the end of its read",
        observed=observed or f"it changed {when}",
        hint="stop what writes to it (training, logging) and back up again",
    )


def entries_digest(entries: Sequence[Entry]) -> str:
    return hashlib.sha256(canonical_json([e.to_dict() for e in entries])).hexdigest()


def sign_index(entries: Sequence[Entry], head: dict[str, Any], key: Any) -> bytes:
    """The index member's bytes: a signed statement over ``head`` + entries."""
    subject = Subject(head["backup_id"], {"sha256": entries_digest(entries)})
    predicate = {**head, "entries": [e.to_dict() for e in entries]}
    return sign_statement([subject], PREDICATE_TYPE, predicate, key).to_bytes()


@dataclass(frozen=True)
class Index:
    """The index member's bytes and, for a large backup, its pages' bytes."""

    head: bytes
    pages: tuple[bytes, ...] = ()


def make_index(entries: Sequence[Entry], head: dict[str, Any], key: Any) -> Index:
    """The signed index of ``entries``: in one statement when they fit one page,
    else a statement over the digests of its pages."""
    pages: list[tuple[bytes, int]] = []
    rows: list[bytes] = []
    size = 2
    for e in entries:
        row = entry_json(e)
        if rows and (len(rows) >= PAGE_ENTRIES or size + len(row) + 1 > PAGE_BYTES):
            pages.append((b"[" + b",".join(rows) + b"]", len(rows)))
            rows, size = [], 2
        rows.append(row)
        size += len(row) + 1
    if not pages:  # one page: the form every backup had before pages
        return Index(sign_index(entries, head, key))
    pages.append((b"[" + b",".join(rows) + b"]", len(rows)))
    whole = hashlib.sha256()
    listed = []
    for page, count in pages:
        whole.update(page)
        listed.append({"entries": count, "size": len(page), "sha256": sha256_hex(page)})
    subject = Subject(head["backup_id"], {"sha256": whole.hexdigest()})
    predicate = {**head, "entry_count": len(entries), "pages": listed}
    signed = sign_statement([subject], PREDICATE_TYPE, predicate, key).to_bytes()
    return Index(signed, tuple(page for page, _ in pages))


_ENCODE = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def entry_json(entry: Entry) -> bytes:
    """``canonical_json(entry.to_dict())``, by the C encoder: for an entry's
    ASCII keys, integers and the strings ``check_member_name`` lets through
    (valid UTF-8), both write the same bytes (RFC 8785 escapes only '"', '\\'
    and control characters, as ``json`` does with ``ensure_ascii=False``);
    tests/backup compare them.  The generic one cost 15 us an entry."""
    return _ENCODE(entry.to_dict()).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
