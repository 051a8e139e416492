"""A model file a judge cannot read says what it expected and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftmanifest.scan.engine import scan_paths

BROKEN = {
    "model.onnx": b"\x08\x08\x3a\xff\xff\x03",  # a graph longer than the file
    "model.gguf": b"GGUF\x03\x00\x00\x00\x01",  # ends inside the tensor count
    "saved_model.pb": b"\x08\x01\x12\xff\x03",  # a meta graph longer than the file
    "cat.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR",  # ends inside a chunk
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_row_names_what_was_expected_and_the_fix(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(BROKEN[name])
    (row,) = scan_paths([path]).findings
    assert row.severity == "error" and row.path == str(path)
    assert row.expected and row.hint, row
