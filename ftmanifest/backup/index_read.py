"""The signed index read back: its entries and pages, checked field by field.

Layer: judging rooms - edge (parses what a trusted key signed; restore and ``backup
check`` reach it through ``members``).  ``index`` builds and signs the index from the
paths backed up; this module takes the predicate's entry list, or a paged index's
pages, from the archive and refuses anything ``index`` would not have written: an
entry that is not a file or folder, a path that is not a safe relative one or repeats,
a name longer than a file system allows, a mode that is not four octal digits, a file
without its size and times (or, as the index says, with or without its sha256), a file
listed with entries below it, a page whose bytes are not the ones the index signed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ftmanifest.backup.errors import IndexMismatchError
from ftmanifest.backup.index import (
    MAX_ENTRIES,
    NAME_MAX_BYTES,
    PAGE_MAX_BYTES,
    Entry,
    check_member_name,
    sha256_hex,
)
from ftmanifest.signing import StrictJSONError, loads_strict

_TYPES = ("file", "dir")

_OCTAL = frozenset("01234567")


def parse_entries(
    raw: Any,
    where: str,
    *,
    seen: set[str] | None = None,
    start: int = 0,
    whole: bool = True,
    digests_after: bool = False,
) -> list[Entry]:
    """The predicate's entry list (or a page of it: ``seen`` holds the paths of
    the pages before, ``start`` its first entry's number, and ``whole`` is left
    False until the last), checked field by field.  ``digests_after``: the
    index says the files' sha256 follow them (``DIGESTS_MEMBER``), so a file
    entry holds none; else each holds its own."""
    if not isinstance(raw, list) or start + len(raw) > MAX_ENTRIES:
        raise _bad_index(where, f"entries is not a list of at most {MAX_ENTRIES} entries")
    out: list[Entry] = []
    seen = set() if seen is None else seen
    for i, item in enumerate(raw, start):
        at = f"entries[{i}]"
        if not isinstance(item, dict) or item.get("type") not in _TYPES:
            raise _bad_index(where, f"{at} is not a file or folder entry")
        path, mode = item.get("path"), item.get("mode")
        if not isinstance(path, str) or check_member_name(path):
            raise _bad_index(where, f"{at}.path is not a safe relative path")
        if path in seen:
            raise _bad_index(where, f"{at}.path repeats {path!r}")
        _check_names(path, where, at)
        seen.add(path)
        if not isinstance(mode, str) or len(mode) != 4 or not set(mode) <= _OCTAL:
            raise _bad_index(where, f"{at}.mode is not four octal digits")
        if item["type"] == "dir":
            out.append(Entry(path, "dir", int(mode, 8) & 0o777))
            continue
        size, sha, mtime = item.get("size"), item.get("sha256"), item.get("mtime")
        ok = isinstance(size, int) and size >= 0 and isinstance(mtime, int)
        if digests_after:
            if not ok or "sha256" in item:
                raise _bad_index(where, f"{at} lacks a size or mtime, or holds a sha256")
            sha = ""
        elif not ok or not isinstance(sha, str) or not _HEX64.fullmatch(sha):
            raise _bad_index(where, f"{at} lacks a size, mtime or sha256")
        assert isinstance(size, int) and isinstance(mtime, int)
        out.append(Entry(path, "file", int(mode, 8) & 0o777, size, sha, mtime))
    if whole:
        check_no_file_is_a_folder(out, where)
    return out


@dataclass(frozen=True)
class Page:
    """One page as the signed index lists it."""

    entries: int
    size: int
    sha256: str


def parse_pages(predicate: dict[str, Any], where: str) -> list[Page]:
    """A paged index's pages, checked field by field and against ``entry_count``."""
    count, raw = predicate.get("entry_count"), predicate.get("pages")
    if "entries" in predicate:
        raise _bad_index(where, "it holds both entries and pages")
    if not isinstance(raw, list) or not raw or not isinstance(count, int):
        raise _bad_index(where, "pages is not a list with an entry_count")
    pages: list[Page] = []
    for i, item in enumerate(raw):
        n = item.get("entries") if isinstance(item, dict) else None
        size = item.get("size") if isinstance(item, dict) else None
        sha = item.get("sha256") if isinstance(item, dict) else None
        if not isinstance(n, int) or not isinstance(size, int) or not isinstance(sha, str):
            raise _bad_index(where, f"pages[{i}] lacks its entries, size or sha256")
        if n < 1 or not 2 <= size <= PAGE_MAX_BYTES or not _HEX64.fullmatch(sha):
            raise _bad_index(
                where,
                f"pages[{i}] is not a page of entries",
                field=f"pages[{i}]",
                expected=f"at least one entry, at most {PAGE_MAX_BYTES} bytes, a sha256",
                observed=f"{n} entries, {size} bytes",
            )
        pages.append(Page(n, size, sha))
    total = sum(p.entries for p in pages)
    if total != count or count > MAX_ENTRIES:
        raise _bad_index(
            where,
            "entry_count is not the sum of the pages' entries",
            field="entry_count",
            expected=f"{total} (at most {MAX_ENTRIES})",
            observed=str(count),
        )
    return pages


_HEX64 = re.compile("[0-9a-f]{64}")


def page_entries(raw: bytes, page: Page, number: int, where: str) -> Any:
    """A page's bytes, checked against the signed index, as a JSON list (parsed
    as strictly as the signed index itself: no duplicate keys, NaN or overflow)."""
    got = sha256_hex(raw)
    if len(raw) != page.size or got != page.sha256:
        raise IndexMismatchError(
            f"page {number} of the index is not the one the signed index names",
            path=where,
            field=f"pages[{number - 1}].sha256",
            expected=f"sha256:{page.sha256} ({page.size} bytes)",
            observed=f"sha256:{got} ({len(raw)} bytes)",
            hint="the archive is hostile or damaged; nothing was written",
        )
    try:
        items = loads_strict(raw)
    except StrictJSONError as exc:  # signed by a trusted key, yet not ours
        raise _bad_index(where, f"page {number} is not JSON ({exc})") from None
    if not isinstance(items, list) or len(items) != page.entries:
        raise _bad_index(where, f"page {number} does not hold {page.entries} entries")
    return items


def _check_names(path: str, where: str, at: str) -> None:
    """Every name must fit a file system's (255 bytes); the whole path may be
    any length, as restore reaches each folder from its parent's descriptor."""
    for name in path.split("/"):
        size = len(name.encode("utf-8"))
        if size > NAME_MAX_BYTES:
            raise _bad_index(
                where,
                f"{at}.path has a name of {size} bytes, longer than a file system allows",
                field=f"{at}.path",
                expected=f"names of at most {NAME_MAX_BYTES} bytes",
                observed=f"{size} bytes: {name[:40]!r}...",
            )


def check_no_file_is_a_folder(entries: Sequence[Entry], where: str) -> None:
    files = {e.path for e in entries if e.type == "file"}
    for i, e in enumerate(entries):
        parts = e.path.split("/")
        for n in range(1, len(parts)):
            above = "/".join(parts[:n])
            if above in files:
                raise _bad_index(
                    where,
                    f"entries[{i}].path is inside {above[:200]!r}, which the index lists as a file",
                    field=f"entries[{i}].path",
                    expected=f"{above[:200]!r} listed as a folder, or nothing below it",
                    observed=f"the file {above[:200]!r} and {e.path[:200]!r} below it",
                )


def _bad_index(
    where: str,
    what: str,
    *,
    field: str | None = None,
    expected: str | None = None,
    observed: str | None = None,
) -> IndexMismatchError:
    return IndexMismatchError(
        f"the signed index is malformed: {what}",
        path=where,
        field=field,
        expected=expected,
        observed=observed,
        hint="the backup was not written by this ftmanifest; do not restore it",
    )
