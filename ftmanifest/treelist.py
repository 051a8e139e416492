"""Pinned file lists: a folder's files and digests, kept in the user cache.

Layer: file access (reads and writes ``<cache>/trees/``).  A tree digest
(``hashing.tree_digest``) is sha256 over the records ``relpath NUL digest LF``
in path order, so the list of those records *is* what the digest pins: a list
whose sha256 equals the signed tree digest is the pinned list, with no other
field to bind it, and trust never comes from where it was found.
``lock`` (and every verify that hashes a data folder) stores the list of each
data folder's digest as ``<cache>/trees/<hex>.gz``; ``verify`` reads it back
only when a folder differs from its pin, to name the files that changed, were
added or went missing.  A list that is absent (another machine, a cleared
cache), unreadable or does not hash to its pin names nothing: the folder's own
row still refuses, and says why its files are not named.

gzip (level 1, no name or time in the header) keeps a million-file list near
40 MB; the digest is over the uncompressed records.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ftmanifest import foldercache
from ftmanifest.hashing.tree import TreeFiles
from ftmanifest.statcache import cache_dir

SUFFIX = ".gz"
MAX_NAMED = 50  # rows named per folder; the rest are counted
KEEP = 32  # lists kept in the cache, those used last
MAX_RECORDS_BYTES = 4 << 30  # uncompressed: far above a list of ten million files
_READ = 1 << 20
_HEX_RE = re.compile(r"[0-9a-f]{64}")


def folder() -> Path:
    """``<cache>/trees``: the lists, named by the digest they hash to."""
    return cache_dir() / "trees"


def _hex(digest: str) -> str | None:
    algo, _, hexpart = digest.partition(":")
    return hexpart if algo == "sha256" and _HEX_RE.fullmatch(hexpart) else None


def path_for(digest: str) -> Path | None:
    hexpart = _hex(digest)
    return folder() / (hexpart + SUFFIX) if hexpart else None


def write(digest: str, records: IO[bytes]) -> Path | None:
    """Store ``records`` (the tree digest's input, read from its start) as the list of
    ``digest``, or None when it cannot be stored (the cache is only a convenience:
    nothing fails for want of it).  Records that do not hash to ``digest`` are not
    stored.  Written atomically, private to this user; an existing list is kept."""
    target = path_for(digest)
    if target is None:
        return None
    try:
        if target.exists():
            return target
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return _write(target, digest, records)
    except (OSError, ValueError):
        return None


def _write(target: Path, digest: str, records: IO[bytes]) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(name)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile("", "wb", 1, raw, mtime=0) as gz:
            records.seek(0)
            while chunk := records.read(_READ):
                h.update(chunk)
                gz.write(chunk)
        if f"sha256:{h.hexdigest()}" != digest:
            raise ValueError(f"records do not hash to {digest}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def read(digest: str) -> dict[str, str] | None:
    """The pinned list of ``digest`` as {relpath: digest}, or None when there is
    none here, it is not a regular file, or it does not hash to ``digest``: a list,
    else a folder cache state of that digest (``ftmanifest.foldercache``)."""
    target = path_for(digest)
    if target is None:
        return None
    found = _read_list(target, digest)
    return found if found is not None else _read_state(digest)


def _read_state(digest: str) -> dict[str, str] | None:
    for path in foldercache.find(cache_dir(), digest):
        state = foldercache.read(path)
        if state is None or state.digest != digest:
            continue
        files = TreeFiles(state.names, state.keys, state.digests, None, state.count)
        h = hashlib.sha256()
        for chunk in files.records():
            h.update(chunk)
        if f"sha256:{h.hexdigest()}" == digest:  # trusted by its hash, not by where it was
            return {rel: fd.digest for rel, fd in files.items()}
    return None


def _read_list(target: Path, digest: str) -> dict[str, str] | None:
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as raw:
            if not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
                return None
            if _sha256(raw) != digest:  # checked whole before any record is used
                return None
            raw.seek(0)
            out = dict(_parse(raw))
        os.utime(target)  # used: pruned last
        return out
    except (OSError, ValueError, EOFError, gzip.BadGzipFile, UnicodeDecodeError):
        return None


def _sha256(raw: IO[bytes]) -> str:
    """sha256 of the uncompressed list, refusing one larger than ``MAX_RECORDS_BYTES``."""
    h = hashlib.sha256()
    total = 0
    with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
        while chunk := gz.read(_READ):
            total += len(chunk)
            if total > MAX_RECORDS_BYTES:
                raise ValueError("the list is larger than any pinned list")
            h.update(chunk)
    return f"sha256:{h.hexdigest()}"


def _parse(raw: IO[bytes]) -> Iterator[tuple[str, str]]:
    with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
        yield from iter_records(gz)


def spool() -> IO[bytes]:
    """A file for records: in memory up to 32 MiB (about 280,000 files), then on disk."""
    return tempfile.SpooledTemporaryFile(max_size=32 << 20)


def records_file(files: Mapping[str, Any]) -> IO[bytes]:
    """The records of ``files`` (relpath -> digest, or an object with ``.digest``) in
    tree order, in a ``spool``."""
    out = spool()
    chunks = getattr(files, "records", None)
    if callable(chunks):  # hashing.TreeFiles: in tree order already
        for chunk in chunks():
            out.write(chunk)
        return out
    for rel in sorted(files, key=lambda r: r.encode("utf-8")):
        value = files[rel]
        dig = value if isinstance(value, str) else value.digest
        out.write(rel.encode("utf-8") + b"\0" + dig.encode("ascii") + b"\n")
    return out


def keep(digest: str | None, files: Mapping[str, Any]) -> None:
    """Store the list of a folder whose tree digest is ``digest`` (its ``files``, as
    ``records_file`` takes them) unless it is stored already; then prune the oldest."""
    target = path_for(digest) if digest else None
    if target is None or digest is None or os.path.lexists(target):
        return
    if getattr(files, "stored", None) is not None:
        return  # the folder cache holds this list (``read`` finds it there)
    records = records_file(files)
    try:
        if write(digest, records) is not None:
            _prune(target.parent)
    finally:
        records.close()


def _prune(where: Path) -> None:
    """Keep the ``KEEP`` lists used last (read or written)."""
    try:
        names = [n for n in os.listdir(where) if _is_list_name(n)]
        if len(names) <= KEEP:
            return
        ages = sorted(names, key=lambda n: os.stat(where / n).st_mtime_ns)
        for name in ages[: len(names) - KEEP]:
            (where / name).unlink(missing_ok=True)
    except OSError:
        pass


def _is_list_name(name: str) -> bool:
    return name.endswith(SUFFIX) and bool(_HEX_RE.fullmatch(name[: -len(SUFFIX)]))


def iter_records(records: IO[bytes] | io.BufferedIOBase) -> Iterator[tuple[str, str]]:
    """(relpath, digest) of every record in ``records``, from where it is."""
    tail = b""
    while chunk := records.read(_READ):
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        for line in lines:
            rel, sep, dig = line.partition(b"\0")
            if not sep:
                raise ValueError("not a file list")
            yield rel.decode("utf-8"), dig.decode("ascii")
    if tail:
        raise ValueError("a file list cut short")


@dataclass
class ListDiff:
    """What differs between a pinned file list and a folder, by relative path."""

    changed: list[tuple[str, str, str]] = field(default_factory=list)  # path, pinned, here
    added: list[tuple[str, str]] = field(default_factory=list)  # path, here
    missing: list[tuple[str, str]] = field(default_factory=list)  # path, pinned
    total: int = 0  # rows in all, named or only counted

    @property
    def named(self) -> int:
        return len(self.changed) + len(self.added) + len(self.missing)


def diff(pinned: dict[str, str], here: Iterable[tuple[str, str]]) -> ListDiff:
    """Every difference, the first ``MAX_NAMED`` named (in path order), the rest counted."""
    out = ListDiff()
    left = dict(pinned)
    rows: list[tuple[str, str | None, str | None]] = []
    for rel, dig in here:
        was = left.pop(rel, None)
        if was != dig:
            rows.append((rel, was, dig))
    rows += [(rel, pin, None) for rel, pin in left.items()]
    rows.sort(key=lambda r: r[0].encode("utf-8"))
    out.total = len(rows)
    for rel, old, new in rows[:MAX_NAMED]:
        if old is None and new is not None:
            out.added.append((rel, new))
        elif new is None and old is not None:
            out.missing.append((rel, old))
        elif old is not None and new is not None:
            out.changed.append((rel, old, new))
    return out
