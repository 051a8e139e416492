"""A backup is never written with an index that restore refuses to read.

The signed index is the archive's first member, read whole by restore and
``backup check``, which refuse one over ``INDEX_MAX_BYTES``.  ``backup create``
used to sign and encrypt such an index all the same and report the backup
written: a backup that no command could ever restore (found at about 280,000
files with ordinary path lengths, or 12,000 files whose paths are long).
It now refuses before anything is hashed when even the smallest index those
paths make is over the limit, and again, exactly, before anything is
encrypted; and at the limit itself the backup is written and restores.
"""

from __future__ import annotations

import os

import pytest

from ftmanifest.backup import index as index_mod
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


def test_an_index_over_the_real_limit_is_refused_before_anything_is_written(
    keys, tmp_path, monkeypatch, capsys
):
    # 16,000 paths of ~3,300 bytes: ~55 MB of entries, ~73 MB once base64'd in
    # its envelope, over the 64 MiB restore reads.
    src = _deep_tree(tmp_path / "src", 16_000)
    out = tmp_path / "backups"
    import ftmanifest.hashing

    def no_hashing(*a, **k):
        raise AssertionError("the refusal comes before any file is hashed")

    monkeypatch.setattr(ftmanifest.hashing, "hash_files", no_hashing)
    with pytest.raises(InputError) as caught:
        backup(keys, [src], out)
    err = caught.value
    assert "index" in str(err) and "restore" in str(err)
    assert f"at most {index_mod.INDEX_MAX_BYTES} bytes" in (err.expected or "")
    assert "bytes" in (err.observed or "")
    assert "fewer" in (err.hint or "")
    assert not out.exists() or not any(out.iterdir())  # no archive, no metadata, no temp

    from ftmanifest.cli import main

    argv = ["backup", "create", str(src), "--to", str(out), "--key", str(keys.signing_path),
            "-r", keys.recipient.text]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "signed index would be" in err and "MiB" in err and "fewer files" in err
    assert "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_the_exact_check_after_signing_matches_what_restore_reads(keys, tmp_path, monkeypatch):
    """The estimate before hashing is a lower bound; the signed bytes decide.  A
    limit between the two is refused by the exact check, with nothing written."""
    src = _deep_tree(tmp_path / "src", 40, depth=2)
    sized = backup(keys, [src], tmp_path / "sizing")
    actual = _index_size(sized.archive, keys)
    estimate = index_mod.smallest_index_bytes([(e.path, e.type, e.size) for e in _entries_of(src)])
    assert estimate < actual  # a lower bound, never above what is signed
    monkeypatch.setattr(index_mod, "INDEX_MAX_BYTES", actual - 1)
    out = tmp_path / "backups"
    with pytest.raises(InputError, match="index"):
        backup(keys, [src], out)
    assert not out.exists() or not any(out.iterdir())


def test_an_index_at_the_limit_is_written_and_restores(keys, tmp_path, monkeypatch):
    src = _deep_tree(tmp_path / "src", 40, depth=2)
    actual = _index_size(backup(keys, [src], tmp_path / "sizing").archive, keys)
    monkeypatch.setattr(index_mod, "INDEX_MAX_BYTES", actual)
    created = backup(keys, [src], tmp_path / "backups")
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


def _entries_of(src):
    dirs, files = index_mod.collect([src])
    return [*dirs, *(index_mod.Entry(n, "file", 0o644, st.st_size) for n, _, st in files)]


def _index_size(archive, keys) -> int:
    """The first member's size, from the decrypted tar stream (pyrage)."""
    import io
    import tarfile

    import pyrage

    line = next(
        t for t in keys.identity_path.read_text().splitlines() if t.startswith("AGE-SECRET-KEY-")
    )
    plain = pyrage.decrypt(archive.read_bytes(), [pyrage.x25519.Identity.from_str(line)])
    with tarfile.open(fileobj=io.BytesIO(plain), mode="r:") as tar:
        first = tar.next()
        assert first is not None and first.name == index_mod.INDEX_MEMBER
        return first.size
