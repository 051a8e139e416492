"""Text whose encoding changes after the sniffed head (scan's part).

The encoding is guessed from a file's first bytes.  A token in a UTF-16 line
after 16 KB of ASCII used to pass: the scan read the rest as UTF-8, where
``g\\0h\\0p\\0_`` is no token.  UTF-16 runs inside such a file are now decoded
and scanned, and a NUL byte that belongs to no such run is a not-scanned
error, never clean.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftmanifest.scan.engine import scan_paths

TOKEN = "ghp_" + "Pn4Vx8Kq2Mz6Lt0Rb3Wy7Hc5Jd9Gs1Fa8Qe4"
ASCII = b'{"text": "a routine shipping note"}\n' * 500  # 18 KB, past the sniffed head


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_a_token_in_utf16_after_ascii_is_found(tmp_path: Path, codec: str) -> None:
    path = tmp_path / "log.jsonl"
    tail = f'{{"text": "key {TOKEN}"}}\n'.encode(codec)
    path.write_bytes(ASCII + tail)
    assert TOKEN in path.read_bytes()[len(ASCII) :].decode(codec)  # what a UTF-16 reader sees
    found = [f for f in scan_paths([path]).findings if f.rule == "secret.github-pat"]
    assert len(found) == 1 and found[0].line == 501


def test_a_stray_nul_is_an_error_not_clean(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(ASCII + b"abc\x00\x01\x02def\n")
    (row,) = scan_paths([path]).findings
    assert (row.kind, row.severity) == ("not-scanned", "error") and "NUL" in row.message


def test_plain_ascii_stays_clean(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(ASCII)
    assert scan_paths([path]).findings == []
