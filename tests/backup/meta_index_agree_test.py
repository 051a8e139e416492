"""The signed metadata's file count and bytes are the signed index's.

``backup list`` and the free-space check before a restore read the metadata;
restore writes what the index lists.  Both are signed, but separately: when
they disagree (a metadata re-signed over another backup's counts, a bug),
the backup's description is not the backup, and restore and ``backup check``
refuse it naming both numbers, before any file is written.
"""

from __future__ import annotations

import pytest

from ftmanifest.backup.check import check_folder
from ftmanifest.backup.errors import MetadataMismatchError
from ftmanifest.backup.index import INDEX_MEMBER
from tests.backup.conftest import (
    Member,
    entry_for,
    no_staging,
    restore_meta,
    signed_index,
    tar_bytes,
    write_backup,
)


@pytest.mark.parametrize(
    ("described", "field"),
    [
        ([entry_for("ok.txt", b"ok\n"), entry_for("ghost.txt", b"never here\n")], "files"),
        ([entry_for("ok.txt", b"ok\n" * 1000)], "bytes"),
    ],
)
def test_metadata_that_describes_other_files_than_the_index_is_refused(
    keys, tmp_path, described, field
):
    listed = [entry_for("ok.txt", b"ok\n")]
    index, head = signed_index(listed, keys.signing)
    tar = tar_bytes([Member(INDEX_MEMBER, index, mode=0o600), Member("ok.txt", b"ok\n")])
    meta = write_backup(tmp_path / "backups", tar, index, head, described, keys)
    dest = tmp_path / "dest"
    with pytest.raises(MetadataMismatchError, match="metadata and the signed index") as caught:
        restore_meta(keys, meta, dest)
    assert caught.value.field == field
    no_staging(dest)
    checked, _ = check_folder(
        tmp_path / "backups", trust_path=keys.trust_path, identities=lambda m: keys.identities()
    )
    assert [c.ok for c in checked] == [False]


def test_metadata_that_agrees_restores(keys, tmp_path):
    listed = [entry_for("ok.txt", b"ok\n")]
    index, head = signed_index(listed, keys.signing)
    tar = tar_bytes([Member(INDEX_MEMBER, index, mode=0o600), Member("ok.txt", b"ok\n")])
    meta = write_backup(tmp_path / "backups", tar, index, head, listed, keys)
    restore_meta(keys, meta, tmp_path / "dest")
    assert (tmp_path / "dest" / "ok.txt").read_bytes() == b"ok\n"
