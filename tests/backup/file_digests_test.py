"""The files' digests after the files: a backup reads each file once.

The signed index lists paths, modes and sizes and says ``"file_digests":
DIGESTS_MEMBER``; each file's sha256 is taken while it is archived and the
archive's last member holds them, 32 bytes a file in the index's order, its
own sha256 named by the signed metadata.  A hand-made archive (members
signed by the trusted key, metadata re-signed over it: what a holder of the
signing key without the age key could make) that breaks any of that is
refused with nothing written, and ``backup check --read-data`` agrees.
"""

from __future__ import annotations

import hashlib
import tarfile
from datetime import datetime, timezone
from typing import Any

from ftmanifest.backup import index as index_mod
from ftmanifest.backup.check import check_folder
from ftmanifest.backup.errors import IndexMismatchError, MemberRefusedError, MetadataMismatchError
from ftmanifest.backup.meta import new_backup_id
from tests.backup.conftest import (
    Member,
    backup,
    refused_everywhere,
    restore_meta,
    tar_bytes,
    tree_of,
)
from tests.backup.conftest import write_backup as write_signed_backup

DIGESTS = index_mod.DIGESTS_MEMBER
FILES = {"run/a.txt": b"alpha\n", "run/b.bin": bytes(range(256)) * 9, "run/c.txt": b"gamma\n"}


def _entries(files: dict[str, bytes], *, with_sha: bool = False) -> list[index_mod.Entry]:
    out = [index_mod.Entry("run", "dir", 0o755)]
    for name, data in sorted(files.items()):
        sha = hashlib.sha256(data).hexdigest() if with_sha else ""
        out.append(index_mod.Entry(name, "file", 0o644, len(data), sha, 1_700_000_000))
    return out


def _digests(files: dict[str, bytes]) -> bytes:
    return b"".join(hashlib.sha256(data).digest() for _, data in sorted(files.items()))


def _head(says: Any = DIGESTS) -> dict[str, Any]:
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    head = {
        "backup_id": new_backup_id("run", created),
        "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "kind": "run",
        "experiment_id": None,
        "manifest_digest": None,
    }
    if says is not None:
        head["file_digests"] = says
    return head


def _archive(
    tmp_path,
    keys,
    *,
    body: list[Member] | None = None,
    digests: bytes | None = None,
    signed_digests: Any = "same",
    entries: list[index_mod.Entry] | None = None,
    head: dict[str, Any] | None = None,
    after: list[Member] = (),  # type: ignore[assignment]
):
    """Index, folder, files in order, the digests member (``digests``; None
    leaves it out), then ``after``; the metadata names ``signed_digests``
    ("same": the member's sha256)."""
    entries = entries if entries is not None else _entries(FILES)
    head = head or _head()
    index = index_mod.sign_index(entries, head, keys.signing)
    if body is None:
        body = [Member("run", type=b"5", mode=0o755)]
        body += [Member(name, data) for name, data in sorted(FILES.items())]
    digests = _digests(FILES) if digests is None and signed_digests == "same" else digests
    members = [Member(index_mod.INDEX_MEMBER, index, mode=0o600), *body]
    if digests is not None:
        members.append(Member(DIGESTS, digests, mode=0o600))
    members += list(after)
    if signed_digests == "same":
        signed_digests = hashlib.sha256(digests or b"").hexdigest()
    return write_signed_backup(
        tmp_path / "backups",
        tar_bytes(members),
        index,
        head,
        entries,
        keys,
        file_digests_sha256=signed_digests,
    )


_refused = refused_everywhere


def test_the_hand_made_archive_restores(keys, tmp_path):
    """The builder is right: unchanged, its archive restores and checks OK."""
    restore_meta(keys, _archive(tmp_path, keys), tmp_path / "dest")
    assert (tmp_path / "dest" / "run" / "b.bin").read_bytes() == FILES["run/b.bin"]
    checked, _ = check_folder(
        tmp_path / "backups", trust_path=keys.trust_path, identities=lambda m: keys.identities()
    )
    assert [c.ok for c in checked] == [True]


def test_a_real_backup_reads_each_file_once_and_signs_its_digests(keys, tmp_path, monkeypatch):
    src = tmp_path / "run"
    src.mkdir()
    for name, data in FILES.items():
        (tmp_path / name).write_bytes(data)
    opened: list[str] = []
    import os

    real_open = os.open

    def counting(path, *args, **kw):
        if str(path).startswith(str(src)):
            opened.append(str(path))
        return real_open(path, *args, **kw)

    monkeypatch.setattr(os, "open", counting)
    created = backup(keys, [src], tmp_path / "backups")
    monkeypatch.undo()
    assert sorted(opened) == sorted(str(tmp_path / n) for n in FILES)  # once each
    assert created.meta.file_digests_sha256 == hashlib.sha256(_digests(FILES)).hexdigest()
    restore_meta(keys, created.meta_path, tmp_path / "dest")
    assert tree_of(tmp_path / "dest" / "run") == tree_of(src)


def test_a_changed_file_is_refused_by_name(keys, tmp_path):
    body = [Member("run", type=b"5", mode=0o755)]
    for name, data in sorted(FILES.items()):
        body.append(Member(name, b"GAMMA\n" if name == "run/c.txt" else data))
    err = _refused(keys, tmp_path, _archive(tmp_path, keys, body=body), IndexMismatchError,
                   "'run/c.txt' does not have the digest the backup signed")  # fmt: skip
    assert err.field == "sha256"
    assert err.expected == "sha256:" + hashlib.sha256(b"gamma\n").hexdigest()
    assert err.observed == "sha256:" + hashlib.sha256(b"GAMMA\n").hexdigest()


def test_digests_matching_changed_bytes_are_refused_by_the_metadata(keys, tmp_path):
    changed = {**FILES, "run/c.txt": b"GAMMA\n"}
    body = [Member("run", type=b"5", mode=0o755)]
    body += [Member(name, data) for name, data in sorted(changed.items())]
    meta = _archive(tmp_path, keys, body=body, digests=_digests(changed),
                    signed_digests=hashlib.sha256(_digests(FILES)).hexdigest())  # fmt: skip
    err = _refused(keys, tmp_path, meta, IndexMismatchError, "not the ones the metadata names")
    assert err.field == "file_digests_sha256"


def test_members_out_of_the_index_order_are_refused(keys, tmp_path):
    body = [Member("run", type=b"5", mode=0o755)]
    body += [Member(name, FILES[name]) for name in ("run/b.bin", "run/a.txt", "run/c.txt")]
    err = _refused(keys, tmp_path, _archive(tmp_path, keys, body=body), MemberRefusedError,
                   "out of the signed index's order")  # fmt: skip
    assert err.expected == "'run/a.txt'" and err.observed == "'run/b.bin'"


def test_an_archive_without_its_digests_is_refused(keys, tmp_path):
    meta = _archive(tmp_path, keys, digests=None,
                    signed_digests=hashlib.sha256(_digests(FILES)).hexdigest())  # fmt: skip
    err = _refused(keys, tmp_path, meta, IndexMismatchError, "ends without its files' digests")
    assert err.field == "file_digests"


def test_digests_of_the_wrong_size_are_refused(keys, tmp_path):
    meta = _archive(tmp_path, keys, digests=_digests(FILES)[:-1])
    err = _refused(keys, tmp_path, meta, IndexMismatchError, "not the list of the files' digests")
    assert err.expected and "95 bytes" not in err.expected and "96 bytes" in err.expected


def test_digests_before_the_last_file_are_refused(keys, tmp_path):
    body = [Member("run", type=b"5", mode=0o755), Member("run/a.txt", FILES["run/a.txt"])]
    body.append(Member(DIGESTS, _digests(FILES), mode=0o600))
    body += [Member(n, FILES[n]) for n in ("run/b.bin", "run/c.txt")]
    meta = _archive(tmp_path, keys, body=body, digests=b"",
                    signed_digests=hashlib.sha256(_digests(FILES)).hexdigest())  # fmt: skip
    _refused(keys, tmp_path, meta, IndexMismatchError, "not in the archive")


def test_a_member_after_the_digests_is_refused(keys, tmp_path):
    meta = _archive(tmp_path, keys, after=[Member("run/d.txt", b"late\n")])
    err = _refused(keys, tmp_path, meta, MemberRefusedError, "follows " + DIGESTS)
    assert err.field == "member" and err.observed == "'run/d.txt'"


def test_a_digests_member_that_is_a_symlink_is_refused(keys, tmp_path):
    link = Member(DIGESTS, type=tarfile.SYMTYPE, linkname="/etc/passwd")
    meta = _archive(tmp_path, keys, digests=None, after=[link],
                    signed_digests=hashlib.sha256(_digests(FILES)).hexdigest())  # fmt: skip
    err = _refused(keys, tmp_path, meta, IndexMismatchError, "not the list of the files' digests")
    assert err.observed and "symbolic link" in err.observed


def test_an_entry_named_as_the_digests_member_is_refused(keys, tmp_path):
    """A trusted index listing a file of that name: its member is taken as the
    digests, and the entry is then missing, never restored as a file."""
    files = {**FILES, DIGESTS: b"not digests\n"}
    entries = _entries(files)  # the run folder, then that file first: the index's order
    body = [Member("run", type=b"5", mode=0o755), Member(DIGESTS, files[DIGESTS])]
    body += [Member(n, d) for n, d in sorted(FILES.items())]
    meta = _archive(tmp_path, keys, entries=entries, body=body, digests=None,
                    signed_digests=hashlib.sha256(_digests(files)).hexdigest())  # fmt: skip
    err = _refused(keys, tmp_path, meta, IndexMismatchError, "not in the archive")
    assert DIGESTS in (err.observed or "")


def test_an_index_saying_digests_follow_with_metadata_naming_none_is_refused(keys, tmp_path):
    meta = _archive(tmp_path, keys, signed_digests=None, digests=_digests(FILES))
    err = _refused(keys, tmp_path, meta, MetadataMismatchError, "disagree on where")
    assert err.field == "file_digests_sha256"


def test_metadata_naming_digests_an_index_holds_itself_is_refused(keys, tmp_path):
    entries = _entries(FILES, with_sha=True)
    meta = _archive(tmp_path, keys, entries=entries, head=_head(None))
    _refused(keys, tmp_path, meta, MetadataMismatchError, "disagree on where")


def test_an_entry_holding_a_sha256_when_digests_follow_is_malformed(keys, tmp_path):
    meta = _archive(tmp_path, keys, entries=_entries(FILES, with_sha=True))
    _refused(keys, tmp_path, meta, IndexMismatchError, "holds a sha256")


def test_file_digests_naming_another_member_is_malformed(keys, tmp_path):
    meta = _archive(tmp_path, keys, head=_head("run/a.txt"))
    err = _refused(keys, tmp_path, meta, IndexMismatchError, "file_digests names another")
    assert err.expected == DIGESTS
