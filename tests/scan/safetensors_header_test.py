"""safetensors header checks on real and hand-corrupted files (scan.artifacts.safetensors)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from ftmanifest.findings import Finding
from ftmanifest.scan.artifacts.binary import scan_binary
from ftmanifest.scan.artifacts.safetensors import check_safetensors
from ftmanifest.scan.artifacts.sniff import detect_format

TOKEN = "hf_" + "Kq8WJrlnHiKb7KDSPDTEosxWSWpmL29zMG"  # random: typed runs are placeholders


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
    from ftmanifest.scan.text.text import scan_text

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


def _scanned(path: Path) -> list[Finding]:
    from ftmanifest.scan.text.text import scan_text

    return [f for f in scan_binary(path, "safetensors", scan_text) if f.kind != "malformed"]


def test_tensor_names_metadata_keys_and_extra_fields_are_scanned(tmp_path: Path) -> None:
    header, body = _split(_real(tmp_path, {f"note {TOKEN}": "v"}))
    header["layer.ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"] = header.pop("b")
    header["a"]["comment"] = "mail ana.silva@uni-lisboa.pt"
    path = _build(tmp_path / "k.safetensors", json.dumps(header).encode(), body)
    found = _scanned(path)
    parts = sorted((f.rule, f.extra["header_part"]) for f in found)
    assert parts == [
        ("pii.email", "tensor-field"),
        ("secret.github-pat", "tensor-name"),
        ("secret.huggingface-token", "metadata-key"),
    ], parts
    assert all(f.line is None and f.column is None for f in found)
    assert all(TOKEN not in (f.excerpt or "") + f.message + str(f.extra) for f in found)


def _dims_header(tmp_path: Path, shape: list[int], nbytes: int) -> Path:
    info = {"dtype": "U8", "shape": shape, "data_offsets": [0, nbytes]}
    return _build(tmp_path / "dims.safetensors", json.dumps({"a": info}).encode(), b"\0" * nbytes)


def test_huge_shape_overflow_stops_at_the_first_overflow() -> None:
    from ftmanifest.scan.artifacts.safetensors import numel

    seen = 0

    def dims():  # type: ignore[no-untyped-def]
        nonlocal seen
        for _ in range(300_000):
            seen += 1
            yield 2**62

    assert numel(dims()) is None and seen == 2
    assert numel([0, 2**62, 2**62]) == 0  # the library folds left: 0 first never overflows
    assert numel([2**62, 2**62, 0]) is None
    assert numel([2**64]) is None and numel([]) == 1


def test_300000_dimension_header_is_judged_quickly(tmp_path: Path) -> None:
    import time

    path = _dims_header(tmp_path, [2**62] * 300_000, 1)
    t = time.perf_counter()
    rules = _rules(path)
    assert time.perf_counter() - t < 2.0  # generous guard; was a hang
    assert rules == ["safetensors.shape-overflow"]


def test_many_unit_dimensions_are_accepted_like_the_library(tmp_path: Path) -> None:
    assert _rules(_dims_header(tmp_path, [1] * 300_000, 1)) == []


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=20,
)
_entry = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["F32", "U8", "F4", "X"]),
        "shape": st.lists(st.integers(0, 2**65) | st.just(2**62), max_size=6),
        "data_offsets": st.lists(st.integers(-1, 64), min_size=2, max_size=2),
    },
    optional={"extra": _json},
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    header=st.dictionaries(st.text(max_size=10), _entry | _json, max_size=4),
    body=st.binary(max_size=64),
    cut=st.integers(0, 8),
)
def test_fuzzed_headers_never_raise(tmp_path: Path, header: dict, body: bytes, cut: int) -> None:
    from ftmanifest.scan.text.text import scan_text

    raw = json.dumps(header).encode()
    raw = raw[: len(raw) - cut] if cut < 4 else raw
    found = scan_binary(_build(tmp_path / "f.safetensors", raw, body), "safetensors", scan_text)
    assert all(f.kind in ("malformed", "secret", "pii") and f.path for f in found)
    assert all(f.line is None for f in found if f.kind != "malformed")
