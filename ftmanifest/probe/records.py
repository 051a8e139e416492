"""Probe: the installed distributions an interpreter sees, and the files their RECORDs list.

Layer: probes and runtime.  A wheel installer writes ``<name>.dist-info/RECORD``:
one CSV row per installed file, ``path,sha256=<urlsafe base64, no padding>,size``,
the path relative to the folder holding the ``.dist-info`` (``../../bin/x`` for
a script).  A file that is not listed, or whose bytes no longer have the listed
hash, is not what was installed, whatever the version says.  Rows without a
hash (the RECORD itself, bytecode pip compiled after installing) are kept with
``digest=None``.

The distributions come from ``ftmanifest.probe.interpreter``'s observation (the
``distributions`` list), so they are those of the interpreter observed, not of
this process.  Paths are keyed by :func:`real_path`: the folder resolved, the
name kept, so ``lib64/`` and ``lib/`` of a venv name one file once.
"""

from __future__ import annotations

import base64
import binascii
import csv
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from operator import methodcaller
from typing import Any
from urllib.parse import unquote, urlparse

from ftmanifest.statcache import StatCache, StatKey

_SPLIT = methodcaller("split", ",", 1)


@dataclass(frozen=True)
class Distribution:
    """One ``*.dist-info`` folder on ``sys.path``."""

    name: str
    version: str | None
    info: str
    """The ``.dist-info`` folder."""
    folder: str
    """The folder holding it (RECORD paths are relative to it)."""
    record: str | None
    editable: str | None = None
    """The project folder of an editable install (``direct_url.json``
    ``dir_info.editable``), else None."""
    url: str | None = None
    """``direct_url.json``'s url, when it has one."""
    installer: str | None = None


@dataclass(frozen=True)
class RecordedFile:
    """A file as its distribution's RECORD lists it."""

    distribution: Distribution
    digest: str | None
    """``sha256:<hex>``, or None when the row has no hash."""
    problem: str | None = None
    """Why the row's hash cannot be compared (another algorithm, not base64)."""


@lru_cache(maxsize=4096)
def real_folder(folder: str) -> str:
    return os.path.realpath(folder)


def forget_paths() -> None:
    """Resolve folders and paths afresh (a judgement starts with this: a folder may have
    been replaced by a symlink since the last one)."""
    real_folder.cache_clear()
    real_path.cache_clear()


@lru_cache(maxsize=65536)
def real_path(path: str) -> str:
    """``path`` with its folder resolved (one ``realpath`` per folder, cached); a
    symlink as the last part is resolved too, so the file the interpreter read is named."""
    head, name = os.path.split(os.path.abspath(path))
    joined = os.path.join(real_folder(head), name)
    return os.path.realpath(joined) if os.path.islink(joined) else joined


def distributions(observed: Iterable[Mapping[str, Any]]) -> list[Distribution]:
    """The ``distributions`` of an interpreter observation, as :class:`Distribution`."""
    out = []
    for entry in observed:
        direct = entry.get("direct_url") or {}
        url = direct.get("url") if isinstance(direct, dict) else None
        info = direct.get("dir_info") if isinstance(direct, dict) else None
        editable = None
        if isinstance(info, dict) and info.get("editable") and isinstance(url, str):
            parsed = urlparse(url)
            if parsed.scheme == "file":
                editable = os.path.normpath(unquote(parsed.path))
        out.append(
            Distribution(
                name=str(entry.get("name") or os.path.basename(str(entry["path"]))),
                version=entry.get("version"),
                info=str(entry["path"]),
                folder=str(entry["folder"]),
                record=entry.get("record"),
                editable=editable,
                url=url if isinstance(url, str) else None,
                installer=entry.get("installer"),
            )
        )
    return out


TOPS_ALGO = "record-tops-v1"  # stat cache: a RECORD's top-level names, "/"-separated


class RecordIndex:
    """The files the RECORDs of some distributions list, by :func:`real_path` key.

    The first distribution listing a path wins, as the first on ``sys.path`` is
    the one imported; an unreadable RECORD lists nothing (its files are then
    judged as files no RECORD lists).  A row's hash is decoded when it is looked
    up.  ``wanted``: only these paths will be looked up, so a RECORD none of whose
    top-level names (``torch``, ``six.py``) holds one is not parsed; the names of
    each RECORD are kept in the stat cache (``cache``), so a second run parses only
    the RECORDs of what it imported (a venv with torch lists some 50,000 files).
    """

    def __init__(
        self,
        dists: Iterable[Distribution],
        wanted: Iterable[str] | None = None,
        cache: StatCache | None = None,
    ) -> None:
        self._rows: dict[str, tuple[Distribution, str]] = {}
        dists = list(dists)
        prefixes = {dist.folder: os.path.join(real_folder(dist.folder), "") for dist in dists}
        tops = _tops_by_folder(wanted, set(prefixes.values())) if wanted is not None else None
        for dist in reversed(dists):  # earlier distributions overwrite later ones
            prefix = prefixes[dist.folder]
            here = tops.get(prefix, set()) if tops is not None else None
            if dist.record is None or here == set():
                continue
            try:
                rows = _relevant_rows(dist.record, here, cache)
            except (OSError, UnicodeDecodeError, csv.Error):
                continue
            # installers write normalised relative paths; only a script's climbs out
            self._rows.update(
                (os.path.normpath(prefix + rel) if rel[:1] == "." else prefix + rel, (dist, rest))
                for rel, rest in rows
            )

    def get(self, path: str) -> RecordedFile | None:
        row = self._rows.get(path)
        return None if row is None else _recorded(*row)

    def __contains__(self, path: object) -> bool:
        return path in self._rows

    def __len__(self) -> int:
        return len(self._rows)


def record_index(
    dists: Iterable[Distribution],
    wanted: Iterable[str] | None = None,
    cache: StatCache | None = None,
) -> RecordIndex:
    """The :class:`RecordIndex` of ``dists`` (for ``wanted`` paths only, when given)."""
    return RecordIndex(dists, wanted, cache)


def _tops_by_folder(paths: Iterable[str], folders: Iterable[str]) -> dict[str, set[str]]:
    """{folder: the first names under it of ``paths``} for each folder (ending in '/')."""
    out: dict[str, set[str]] = {f: set() for f in folders}
    for path in paths:
        for folder, tops in out.items():
            if path.startswith(folder):
                tops.add(path[len(folder) :].split(os.sep, 1)[0])
    return out


def _relevant_rows(
    record: str, tops: set[str] | None, cache: StatCache | None
) -> list[tuple[str, str]]:
    """The rows of ``record``, or [] when none of its top-level names is in ``tops``."""
    if tops is None:
        return _rows(record)
    key = StatKey.of(os.stat(record))
    known = cache.lookup(record, TOPS_ALGO, key) if cache is not None else None
    if known is not None and not tops.intersection(known.split("/")):
        return []
    started = time.time_ns()
    rows = _rows(record)
    if cache is not None and known is None:
        names = sorted({rel.split("/", 1)[0] for rel, _rest in rows})
        cache.put(record, TOPS_ALGO, key, "/".join(names), hashed_at_ns=started)
    return rows if tops.intersection(rel.split("/", 1)[0] for rel, _ in rows) else []


def _rows(record: str) -> list[tuple[str, str]]:
    """(path, 'hash,size') of each RECORD row; quoted rows (a comma in a path) through csv."""
    with open(record, encoding="utf-8", newline="") as fh:
        text = fh.read()
    if '"' not in text:
        return [tuple(pair) for pair in map(_SPLIT, text.splitlines()) if len(pair) == 2]
    return [(row[0], ",".join(row[1:])) for row in csv.reader(text.splitlines()) if row]


def _recorded(dist: Distribution, rest: str) -> RecordedFile:
    value = rest.rpartition(",")[0] if "," in rest else rest
    if not value:
        return RecordedFile(dist, None)
    algo, _, b64 = value.partition("=")
    if algo != "sha256":
        return RecordedFile(dist, None, f"RECORD gives a {algo or 'malformed'} hash, not sha256")
    try:
        raw = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))
    except (binascii.Error, ValueError):
        return RecordedFile(dist, None, "RECORD's sha256 is not base64")
    if len(raw) != 32:
        return RecordedFile(dist, None, "RECORD's sha256 is not 32 bytes")
    return RecordedFile(dist, "sha256:" + raw.hex())
