"""safetensors header checks on real and hand-corrupted files (ftmanifest.scan.safetensors)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from ftmanifest.findings import Finding
from ftmanifest.scan.binary import scan_binary
from ftmanifest.scan.safetensors import check_safetensors
from ftmanifest.scan.sniff import detect_format

TOKEN = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"


def _real(tmp_path: Path, metadata: dict[str, str] | None = None) -> Path:
    path = tmp_path / "model.safetensors"
    tensors = {"a": torch.ones(2, 3), "b": torch.zeros(4, dtype=torch.bfloat16)}
    save_file(tensors, str(path), metadata=metadata)
    return path


def _split(path: Path) -> tuple[dict[str, Any], bytes]:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _build(path: Path, header: bytes, body: bytes, n: int | None = None) -> Path:
    path.write_bytes(struct.pack("<Q", len(header) if n is None else n) + header + body)
    return path


def _rules(path: Path, **kw: Any) -> list[str]:
    found = check_safetensors(path, **kw)
    assert all(f.kind == "malformed" for f in found)
    return [f.rule for f in found]


def test_real_file_is_clean(tmp_path: Path) -> None:
    path = _real(tmp_path, {"format": "pt", "note": "fine-tuned"})
    assert detect_format(path) == "safetensors"
    assert scan_binary(path, "safetensors", None) == []


def test_metadata_strings_go_to_the_real_text_scanner(tmp_path: Path) -> None:
    from ftmanifest.scan.text import scan_text

    path = _real(tmp_path, {"format": "pt", "hub": f"token={TOKEN}"})
    found = scan_binary(path, "safetensors", scan_text)
    secrets = [f for f in found if f.kind == "secret"]
    assert secrets and secrets[0].extra["metadata_key"] == "hub"
    assert all(TOKEN not in (f.excerpt or "") + f.message for f in found)


def test_length_prefix_beyond_file(tmp_path: Path) -> None:
    data = _real(tmp_path).read_bytes()
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", len(data)) + data[8:])
    assert _rules(path) == ["safetensors.header-beyond-file"]


def test_header_over_cap(tmp_path: Path) -> None:
    path = _build(tmp_path / "x", b'{"a":1}', b"", n=200_000_000)
    assert _rules(path) == ["safetensors.header-too-large"]
    small = _real(tmp_path)
    assert _rules(small, max_header=10) == ["safetensors.header-too-large"]


def test_duplicate_keys(tmp_path: Path) -> None:
    header, body = _split(_real(tmp_path))
    raw = json.dumps(header)[:-1] + ', "a": ' + json.dumps(header["a"]) + "}"
    assert _rules(_build(tmp_path / "d", raw.encode(), body)) == ["safetensors.duplicate-key"]


def test_overlapping_offsets(tmp_path: Path) -> None:
    header, body = _split(_real(tmp_path))
    header["b"]["data_offsets"] = [8, 16]  # inside tensor a's bytes
    rules = _rules(_build(tmp_path / "o", json.dumps(header).encode(), body))
    assert rules == ["safetensors.overlapping-offsets"]


def test_non_string_metadata(tmp_path: Path) -> None:
    header, body = _split(_real(tmp_path, {"k": "v"}))
    header["__metadata__"] = {"k": "v", "steps": 5, "nested": {"x": "y"}}
    rules = _rules(_build(tmp_path / "m", json.dumps(header).encode(), body))
    assert rules == ["safetensors.metadata-not-string"] * 2


def test_truncated_file(tmp_path: Path) -> None:
    data = _real(tmp_path).read_bytes()
    path = tmp_path / "t.safetensors"
    path.write_bytes(data[:-5])
    assert _rules(path) == ["safetensors.data-out-of-bounds"]
    path.write_bytes(data[:5])
    assert _rules(path) == ["safetensors.truncated"]


def test_invalid_utf8(tmp_path: Path) -> None:
    header, body = _split(_real(tmp_path, {"k": "v"}))
    raw = json.dumps(header).encode().replace(b'"v"', b'"\xff"')
    assert _rules(_build(tmp_path / "u", raw, body)) == ["safetensors.header-not-utf8"]


@pytest.mark.parametrize(
    ("edit", "rule"),
    [
        (lambda h: h["a"].update(dtype="F128"), "safetensors.bad-dtype"),
        (lambda h: h["a"].update(shape=[2, -3]), "safetensors.bad-shape"),
        (lambda h: h["a"].update(shape=[2, 4]), "safetensors.size-mismatch"),
        (lambda h: h["a"].update(data_offsets=[24, 0]), "safetensors.bad-offsets"),
        (lambda h: h.pop("b"), "safetensors.trailing-data"),
        (lambda h: h.update(__metadata__=["x"]), "safetensors.metadata-not-object"),
    ],
)
def test_entry_defects(tmp_path: Path, edit: Any, rule: str) -> None:
    header, body = _split(_real(tmp_path))
    edit(header)
    assert rule in _rules(_build(tmp_path / "e", json.dumps(header).encode(), body))


@pytest.mark.parametrize(
    "raw", [b"[1, 2]", b'{"a": NaN}', b"{not json", b'{"a": {"dtype": "F32"}}  \xff']
)
def test_not_a_json_object(tmp_path: Path, raw: bytes) -> None:
    found = check_safetensors(_build(tmp_path / "j", raw, b""))
    assert len(found) == 1 and found[0].kind == "malformed"


def test_unreadable_file_is_not_scanned(tmp_path: Path) -> None:
    found = check_safetensors(tmp_path / "missing.safetensors")
    assert [f.kind for f in found] == ["not-scanned"]


def test_finding_shape(tmp_path: Path) -> None:
    found = check_safetensors(_build(tmp_path / "x", b'{"a":1}', b"", n=10**9))
    assert isinstance(found[0], Finding) and found[0].severity == "error"
    assert found[0].path == str(tmp_path / "x")
