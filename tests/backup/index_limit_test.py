"""A backup of any number of files has an index that restore reads.

The signed index is the archive's first member, read whole by restore and
``backup check``, which refuse one over 64 MiB.  ``backup create`` used to
sign and encrypt such an index all the same and report the backup written:
a backup that no command could ever restore (about 290,000 files with
ordinary paths, or 16,000 whose paths are long).  A large backup's index now
lists its entries in pages after it, each bound by its sha256 in the signed
index, so neither the index nor any page grows with the backup.
"""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from ftmanifest.backup import index as index_mod
from ftmanifest.backup.check import check_folder
from ftmanifest.errors import InputError
from tests.backup.conftest import backup, restore_meta, tree_of


def _deep_tree(root, files: int, depth: int = 13):
    """``files`` empty files below ``depth`` folders of 250-byte names: each path
    about 3,300 bytes (the absolute path stays under PATH_MAX), so a few
    thousand files fill many MiB of index."""
    where = root / "run"
    for level in range(depth):
        where = where / (f"{level:02d}" + "d" * 248)
    where.mkdir(parents=True)
    fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(files):
            os.close(os.open(f"f{i:06d}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    return root / "run"


def _members(archive, keys) -> list[tuple[str, int]]:
    """The first members' names and sizes, from the archive decrypted by pyrage."""
    import pyrage

    line = next(
        t for t in keys.identity_path.read_text().splitlines() if t.startswith("AGE-SECRET-KEY-")
    )
    plain = pyrage.decrypt(archive.read_bytes(), [pyrage.x25519.Identity.from_str(line)])
    with tarfile.open(fileobj=io.BytesIO(plain), mode="r:") as tar:
        return [(m.name, m.size) for m in tar.getmembers()]


def test_a_backup_whose_entries_pass_64_mib_is_written_in_pages_and_restores(keys, tmp_path):
    # 16,000 paths of ~3,300 bytes: ~55 MB of entries, ~73 MB once base64'd in
    # one envelope, over the 64 MiB restore reads; the old code wrote it anyway.
    src = _deep_tree(tmp_path / "src", 16_000)
    created = backup(keys, [src], tmp_path / "backups")
    members = _members(created.archive, keys)
    names = [n for n, _ in members]
    pages = [m for m in members if m[0].startswith("ftmanifest-index-0")]
    assert names[0] == index_mod.INDEX_MEMBER and members[0][1] < 1 << 20
    assert names[1 : 1 + len(pages)] == [f"ftmanifest-index-{i:06d}.json" for i in range(1, 5)]
    assert all(size <= index_mod.PAGE_BYTES for _, size in pages)
    checked, stray = check_folder(
        tmp_path / "backups", trust_path=keys.trust_path, identities=lambda m: keys.identities()
    )
    assert [c.ok for c in checked] == [True] and not stray
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


def test_pages_by_count_round_trip_with_the_index_naming_them(keys, tmp_path, monkeypatch):
    monkeypatch.setattr(index_mod, "PAGE_ENTRIES", 3)
    src = tmp_path / "run"
    (src / "a" / "b").mkdir(parents=True)
    for i in range(8):
        (src / "a" / f"f{i}.txt").write_text(f"file {i}\n")
    (src / "a" / "b" / "deep.bin").write_bytes(os.urandom(5000))
    created = backup(keys, [src], tmp_path / "backups")
    names = [n for n, _ in _members(created.archive, keys)]
    assert names[:5] == [index_mod.INDEX_MEMBER] + [f"ftmanifest-index-{i:06d}.json"
                                                    for i in range(1, 5)]  # fmt: skip
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


def test_a_top_level_name_like_an_index_member_is_refused(keys, tmp_path):
    src = tmp_path / "ftmanifest-index-000001.json"
    src.write_text("not an index\n")
    with pytest.raises(InputError, match="index members") as caught:
        backup(keys, [src], tmp_path / "backups")
    assert "rename" in (caught.value.hint or "")
    assert not (tmp_path / "backups").exists()


def test_a_page_over_what_restore_reads_is_refused_with_nothing_written(
    keys, tmp_path, monkeypatch
):
    """Only an entry of many MiB could make one; the check is the reader's own limit."""
    monkeypatch.setattr(index_mod, "PAGE_ENTRIES", 2)
    monkeypatch.setattr(index_mod, "PAGE_MAX_BYTES", 300)
    src = _deep_tree(tmp_path / "src", 4, depth=1)
    out = tmp_path / "backups"
    with pytest.raises(InputError, match="index page would be") as caught:
        backup(keys, [src], out)
    assert "at most 300 bytes" in (caught.value.expected or "")
    assert not out.exists() or not any(out.iterdir())


def test_more_entries_than_the_limit_are_refused_before_hashing(keys, tmp_path, monkeypatch):
    monkeypatch.setattr(index_mod, "MAX_ENTRIES", 5)
    import ftmanifest.backup.create

    def no_reading(*a, **k):
        raise AssertionError("the refusal comes before any file is read")

    # where create reads (and hashes) each file as it archives it
    monkeypatch.setattr(ftmanifest.backup.create, "_copy_file", no_reading)
    src = _deep_tree(tmp_path / "src", 6, depth=1)
    with pytest.raises(InputError, match="more than 5 files and folders") as caught:
        backup(keys, [src], tmp_path / "backups")
    assert caught.value.observed == "8"
