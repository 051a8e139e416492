"""The paged index's rows come from the C JSON encoder: byte for byte the
canonical JSON (RFC 8785) the signed index is defined by, for every name a
backup accepts; and the walk finds what the old ``Path`` walk found."""

from __future__ import annotations

import os

import pytest

from ftmanifest.backup.index import Entry, build, check_member_name, entry_json
from ftmanifest.manifest.canonical import canonical_json

NAMES = [
    "run/plain.txt",
    "run/quote \" and apostrophe '",
    "run/é/中文 🚀.txt",  # non-ASCII and beyond the BMP: written as is, not escaped
    "run/line sep \u2028 para sep \u2029",
    "run/slash/ and spaces   ",
    "run/zero-width \u200b joiner \u200d",
]


@pytest.mark.parametrize("name", NAMES)
def test_a_row_is_the_canonical_json_of_its_entry(name):
    assert check_member_name(name) is None
    for entry in (
        Entry(name, "dir", 0o755),
        Entry(name, "file", 0o644, 123456789012, "", 1_700_000_000),
        Entry(name, "file", 0o600, 0, "ab" * 32, -1),  # an older entry, with its sha256
    ):
        assert entry_json(entry) == canonical_json(entry.to_dict())


def test_names_a_backup_refuses_are_the_ones_the_encoders_would_write_apart():
    """Control characters and backslashes are escaped (differently by the two
    encoders, were they let through); the walk refuses them first."""
    for name in ("run/tab\there", "run/nl\nhere", "run\\back", "run/del \x7f"):
        assert check_member_name(name) is not None


def test_the_walk_lists_folders_before_their_files_in_byte_order(tmp_path):
    src = tmp_path / "run"
    (src / "b").mkdir(parents=True)
    (src / "a é").mkdir()
    for rel in ("b/z.txt", "b/a.txt", "a é/x", "Z", "é"):
        (src / rel).write_text(rel)
    os.chmod(src / "Z", 0o600)
    entries, sources = build([src])
    assert [e.path for e in entries] == [
        "run", "run/Z", "run/a é", "run/a é/x", "run/b", "run/b/a.txt", "run/b/z.txt", "run/é",
    ]  # fmt: skip
    assert [s.entry.path for s in sources] == [e.path for e in entries if e.type == "file"]
    assert {s.entry.path: s.entry.mode for s in sources}["run/Z"] == 0o600
    assert all(os.path.samefile(s.path, tmp_path / s.entry.path) for s in sources)
