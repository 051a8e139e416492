"""Hostile pages of a paged index: every one refused before a file is written.

The pages follow the signed index in the archive and are bound by the size and
sha256 it lists; an attacker who cannot sign can only reorder, drop, add or
change members (each a refusal naming the page), and even a trusted signer's
malformed predicate (counts that do not add up, a path on two pages, a file
on one page with a child on the next) is refused as the one-page index
refuses it.  ``backup check --read-data`` reaches the same verdict.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any

import pytest

from ftmanifest.backup import index as index_mod
from ftmanifest.backup.errors import IndexMismatchError
from ftmanifest.backup.meta import new_backup_id
from ftmanifest.manifest.canonical import canonical_json
from ftmanifest.signing.attest import sign_statement
from ftmanifest.signing.intoto import Subject
from tests.backup.conftest import (
    Member,
    entry_for,
    refused_everywhere,
    restore_meta,
    tar_bytes,
)
from tests.backup.conftest import write_backup as write_signed_backup

FILES = {f"run/f{i}.txt": f"file {i}\n".encode() for i in range(6)}


def _entries(files: dict[str, bytes]) -> list[index_mod.Entry]:
    dirs = [index_mod.Entry("run", "dir", 0o755)]
    return dirs + [entry_for(name, data) for name, data in sorted(files.items())]


def _head() -> dict[str, Any]:
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    return {
        "backup_id": new_backup_id("run", created),
        "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "kind": "run",
        "experiment_id": None,
        "manifest_digest": None,
    }


def _page(entries: list[index_mod.Entry]) -> bytes:
    return b"[" + b",".join(canonical_json(e.to_dict()) for e in entries) + b"]"


def _signed(keys, head: dict[str, Any], pages: list[bytes], predicate: Any = None) -> bytes:
    """A paged index over ``pages`` signed by the trusted key; ``predicate``
    overrides its fields (None removes one)."""
    predicate = predicate or {}
    listed = [
        {"entries": p.count(b'"path":'), "size": len(p), "sha256": hashlib.sha256(p).hexdigest()}
        for p in pages
    ]
    body: dict[str, Any] = {**head, "entry_count": sum(x["entries"] for x in listed)}
    body["pages"] = listed
    body.update(predicate)
    body = {k: v for k, v in body.items() if v is not None}
    digest = hashlib.sha256(b"".join(pages)).hexdigest()
    subject = Subject(head["backup_id"], {"sha256": digest})
    return sign_statement([subject], index_mod.PREDICATE_TYPE, body, keys.signing).to_bytes()


def _archive(tmp_path, keys, index: bytes, pages: list[tuple[str, bytes]], head, entries):
    """The index, then ``pages`` as members, then the folder and the files."""
    members = [Member(index_mod.INDEX_MEMBER, index, mode=0o600)]
    members += [Member(name, data, mode=0o600) for name, data in pages]
    members.append(Member("run", type=b"5", mode=0o755))
    members += [Member(name, data) for name, data in sorted(FILES.items())]
    return write_signed_backup(tmp_path / "backups", tar_bytes(members), index, head, entries, keys)


def _in_order(tmp_path, keys, pages: list[bytes], entries, index: bytes | None = None, head=None):
    """The archive of ``pages`` as members 1, 2, ... under ``index`` (by default
    the honest signed index over them)."""
    head = head or _head()
    index = index if index is not None else _signed(keys, head, pages)
    members = [(_name(n), page) for n, page in enumerate(pages, 1)]
    return _archive(tmp_path, keys, index, members, head, entries)


def _refused(keys, tmp_path, meta_path, match: str) -> IndexMismatchError:
    return refused_everywhere(keys, tmp_path, meta_path, IndexMismatchError, match)


def _name(n: int) -> str:
    return index_mod.PAGE_MEMBER.format(n)


@pytest.fixture
def split():
    entries = _entries(FILES)
    return entries, [_page(entries[:4]), _page(entries[4:])]


def test_the_honest_paged_archive_restores(keys, tmp_path, split):
    """The builders below are right: unchanged, their archive restores."""
    entries, pages = split
    restore_meta(keys, _in_order(tmp_path, keys, pages, entries), tmp_path / "dest")
    assert (tmp_path / "dest" / "run" / "f5.txt").read_bytes() == b"file 5\n"


def test_a_changed_page_is_refused(keys, tmp_path, split):
    entries, pages = split
    head = _head()
    forged = pages[1].replace(
        hashlib.sha256(b"file 5\n").hexdigest().encode(),
        hashlib.sha256(b"evil\n").hexdigest().encode(),
    )
    assert forged != pages[1]
    meta = _archive(
        tmp_path, keys, _signed(keys, head, pages), [(_name(1), pages[0]), (_name(2), forged)],
        head, entries,
    )  # fmt: skip
    err = _refused(keys, tmp_path, meta, "page 2 of the index is not the one")
    assert err.field == "pages[1].sha256"


def test_pages_in_another_order_are_refused(keys, tmp_path, split):
    entries, pages = split
    head = _head()
    meta = _archive(
        tmp_path, keys, _signed(keys, head, pages), [(_name(1), pages[1]), (_name(2), pages[0])],
        head, entries,
    )  # fmt: skip
    _refused(keys, tmp_path, meta, "page 1 of the index")


def test_a_missing_page_is_refused_naming_what_came_instead(keys, tmp_path, split):
    entries, pages = split
    head = _head()
    meta = _archive(
        tmp_path, keys, _signed(keys, head, pages), [(_name(1), pages[0])], head, entries
    )
    err = _refused(keys, tmp_path, meta, "page 2 of the signed index is missing")
    assert err.observed == "'run'"


def test_a_page_the_index_does_not_list_is_refused(keys, tmp_path, split):
    entries, pages = split
    head = _head()
    extra = _page([entry_for("run/planted.sh", b"evil\n")])
    meta = _archive(
        tmp_path, keys, _signed(keys, head, pages),
        [(_name(1), pages[0]), (_name(2), pages[1]), (_name(3), extra)], head, entries,
    )  # fmt: skip
    _refused(keys, tmp_path, meta, "is not in the signed index")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"entry_count": 99}, "entry_count is not the sum"),
        ({"entries": []}, "both entries and pages"),
        ({"pages": []}, "pages is not a list"),
        ({"pages": [{"entries": 1, "size": (64 << 20), "sha256": "0" * 64}]}, "not a page"),
        ({"pages": [{"entries": 0, "size": 10, "sha256": "0" * 64}]}, "not a page"),
        ({"pages": [{"entries": 1, "size": 10}]}, "lacks its entries, size or sha256"),
    ],
)
def test_a_signed_but_malformed_page_list_is_refused(keys, tmp_path, split, change, match):
    entries, pages = split
    head = _head()
    meta = _in_order(tmp_path, keys, pages, entries, _signed(keys, head, pages, change), head)
    _refused(keys, tmp_path, meta, match)


def test_a_path_on_two_pages_is_refused(keys, tmp_path, split):
    entries, _ = split
    pages = [_page(entries[:4]), _page(entries[3:])]  # entries[3] on both
    _refused(keys, tmp_path, _in_order(tmp_path, keys, pages, entries), "repeats")


def test_a_file_on_one_page_with_a_child_on_the_next_is_refused(keys, tmp_path, split):
    entries, _ = split
    child = entry_for("run/f0.txt/inner", b"x")
    pages = [_page(entries[:3]), _page([child, *entries[3:]])]
    _refused(
        keys, tmp_path, _in_order(tmp_path, keys, pages, entries), "which the index lists as a file"
    )


def test_a_subject_that_is_not_the_pages_digest_is_refused(keys, tmp_path, split):
    entries, pages = split
    head = _head()
    listed = [
        {"entries": p.count(b'"path":'), "size": len(p), "sha256": hashlib.sha256(p).hexdigest()}
        for p in pages
    ]
    body = {**head, "entry_count": len(entries), "pages": listed}
    subject = Subject(head["backup_id"], {"sha256": hashlib.sha256(b"other").hexdigest()})
    index = sign_statement([subject], index_mod.PREDICATE_TYPE, body, keys.signing).to_bytes()
    meta = _in_order(tmp_path, keys, pages, entries, index, head)
    _refused(keys, tmp_path, meta, "subject does not match")


def test_a_signed_page_nested_too_deep_to_parse_is_refused_not_a_crash(keys, tmp_path, split):
    """json.loads raises RecursionError, not ValueError, on deep nesting: a page
    of 100,000 nested lists (bound by its digest in a trusted index) is a
    malformed-index refusal, never a traceback."""
    entries, pages = split
    deep = b"[" * 100_000 + b"]" * 100_000
    listed = {"entries": 1, "size": len(deep), "sha256": hashlib.sha256(deep).hexdigest()}
    head = _head()
    index = _signed(keys, head, [deep], {"pages": [listed], "entry_count": 1})
    meta = _archive(tmp_path, keys, index, [(_name(1), deep)], head, entries)
    _refused(keys, tmp_path, meta, "page 1 is not JSON")


def test_a_signed_page_with_a_repeated_key_is_refused(keys, tmp_path, split):
    """Two "path" keys in one entry: a lenient parser keeps the last, so the page
    would say one thing to one reader and another to the next."""
    entries, pages = split
    row = canonical_json(entries[1].to_dict())
    twice = row.replace(b'"path":', b'"path":"run/other.txt","path":', 1)
    page = pages[0].replace(row, twice, 1)
    assert page != pages[0]
    meta = _in_order(tmp_path, keys, [page, pages[1]], entries)
    _refused(keys, tmp_path, meta, "page 1 is not JSON")
