"""Hypothesis against the backup parsers and a restore of mutated archives.

Every parser either returns its value or raises its own error class (never a
``KeyError``/``TypeError`` that would be exit 3); a member name it accepts
stays inside the destination; a restore of a mutated tar (signed and
encrypted as an attacker holding both keys would) either gives exactly the
index's files or refuses, and never writes outside DEST or leaves staging.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.backup.check import header_stanzas
from ftmanifest.backup.errors import IndexMismatchError, MetadataMismatchError, RecipientError
from ftmanifest.backup.index import INDEX_MEMBER, check_member_name
from ftmanifest.backup.index_read import parse_entries
from ftmanifest.backup.keys import parse_recipient
from ftmanifest.backup.meta import parse_predicate
from ftmanifest.errors import FtManifestError

from .conftest import (
    Keys,
    Member,
    entry_for,
    no_staging,
    restore_meta,
    signed_index,
    tar_bytes,
    write_backup,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=6),
    max_leaves=20,
)  # fmt: skip
ENTRY_KEYS = st.sampled_from(["path", "type", "mode", "size", "sha256", "mtime"])
ENTRY = st.dictionaries(ENTRY_KEYS, JSON | st.sampled_from(["file", "dir", "0644", "a" * 64]))
META_KEYS = st.sampled_from(
    ["backup_id", "kind", "created", "archive", "index_sha256", "files", "bytes",
     "recipients", "experiment_id", "manifest_digest", "tags", "key_file"]
)  # fmt: skip


@given(st.text(max_size=200))
def test_parse_recipient_returns_or_refuses(text: str) -> None:
    try:
        r = parse_recipient(text)
    except RecipientError:
        return
    assert r.kind in ("x25519", "ssh-ed25519") and r.fingerprint


@given(st.lists(ENTRY, max_size=6) | JSON)
def test_parse_entries_returns_or_refuses(raw: Any) -> None:
    try:
        entries = parse_entries(raw, "fuzz")
    except IndexMismatchError:
        return
    assert len({e.path for e in entries}) == len(entries)


@given(st.dictionaries(META_KEYS, JSON, max_size=12))
def test_parse_predicate_returns_or_refuses(raw: dict[str, Any]) -> None:
    try:
        parse_predicate(raw, "fuzz")
    except MetadataMismatchError:
        return


@given(st.binary(max_size=400))
def test_header_stanzas_returns_or_value_error(data: bytes) -> None:
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"fuzz-age-{os.getpid()}"
    path.write_bytes(b"age-encryption.org/v1\n" + data)
    try:
        header_stanzas(path)
    except ValueError:
        pass
    finally:
        path.unlink()


NAME = st.lists(
    st.sampled_from(["a", "b", "..", ".", "", "/", "\\", "é", "\x00", "\n", "c.txt"]),
    min_size=1,
    max_size=6,
).map("".join)


@given(NAME | st.text(max_size=30))
def test_an_accepted_member_name_stays_inside(name: str) -> None:
    if check_member_name(name) is not None:
        return
    joined = posixpath.normpath(posixpath.join("/dest", name))
    assert joined.startswith("/dest/") and "\x00" not in name


def _good_tar(keys: Keys) -> tuple[bytes, bytes, dict[str, Any], list[Any]]:
    files = {"run/a.txt": b"alpha\n" * 40, "run/b.bin": bytes(range(256)) * 8}
    entries = [entry_for(name, data) for name, data in files.items()]
    from ftmanifest.backup.index import Entry

    entries.insert(0, Entry("run", "dir", 0o755))
    index_bytes, head = signed_index(entries, keys.signing)
    members = [Member(INDEX_MEMBER, index_bytes, mode=0o600), Member("run", type=b"5")]
    members += [Member(name, data) for name, data in files.items()]
    return tar_bytes(members), index_bytes, head, entries


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_mutated_archive_restores_exactly_or_refuses(
    keys: Keys, tmp_path: Path, data: st.DataObject
) -> None:
    tar, index_bytes, head, entries = _good_tar(keys)
    mutated = bytearray(tar)
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        at = data.draw(st.integers(0, len(mutated) - 1))
        if how == "flip":
            mutated[at] ^= data.draw(st.integers(1, 255))
        elif how == "cut":
            del mutated[at : at + data.draw(st.integers(1, 700))]
        else:
            mutated[at:at] = data.draw(st.binary(min_size=1, max_size=600))
    work = tmp_path / f"case-{os.urandom(4).hex()}"
    dest = work / "out" / "dest"
    meta_path = write_backup(work / "b", bytes(mutated), index_bytes, head, entries, keys)
    try:
        restore_meta(keys, meta_path, dest)
    except FtManifestError:
        no_staging(dest)
    else:
        restored = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*"))
        assert restored == sorted(e.path for e in entries)
    outside = sorted(p.name for p in work.iterdir())
    assert outside == ["b", "out"], outside
    shutil.rmtree(work)
