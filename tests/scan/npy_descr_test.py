"""Object dtypes in .npy/.npz are found by numpy's own descr rules.

Each dangerous file is built here with a harmless payload (``Path.touch`` on a
marker) and, where numpy will read it, loaded with ``numpy.load(allow_pickle=
True)`` to prove the payload runs; the scanner must flag every one of them.
"""

from __future__ import annotations

import io
import pathlib
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftmanifest.findings import Finding
from ftmanifest.scan.artifacts.binary import scan_binary
from ftmanifest.scan.artifacts.npy import UnknownDescr, holds_objects
from ftmanifest.scan.artifacts.sniff import detect_format


class Touch:
    """Unpickling this creates ``marker``: the observable, harmless payload."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return pathlib.Path.touch, (pathlib.Path(self.marker),)


def npy_bytes(descr: Any, payload: bytes, version: int = 1) -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": (1,)})
    raw = header.encode("utf-8" if version == 3 else "latin-1")
    raw += b" " * (63 - (len(raw) + 12) % 64) + b"\n"
    size = struct.pack("<H" if version == 1 else "<I", len(raw))
    return b"\x93NUMPY" + bytes([version, 0]) + size + raw + payload


def _payload(marker: Path) -> bytes:
    return pickle.dumps(np.array([Touch(marker)], dtype=object), protocol=4)


def _runs(load: Any, marker: Path) -> bool:
    try:
        load()
    except Exception:  # noqa: BLE001 - only the side effect matters
        pass
    return marker.exists()


def _flagged(found: list[Finding]) -> bool:
    return any(f.rule == "pickle.unsafe-import" and f.severity == "error" for f in found)


def _scan(path: Path) -> list[Finding]:
    return scan_binary(path, detect_format(path), None)


OBJECT_DESCRS = [
    "object",
    "object_",
    "O",
    "|O",
    "O8",
    "i4,O",
    [("a", "object")],
    [("a", "<i4"), ("b", [("c", "|O")])],
    ("|O", (2,)),
    [("a", "|O", (2,))],
]


@pytest.mark.parametrize("descr", OBJECT_DESCRS, ids=repr)
@pytest.mark.parametrize("version", [1, 2, 3])
def test_object_spellings_in_npy(tmp_path: Path, descr: Any, version: int) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "a.npy"
    path.write_bytes(npy_bytes(descr, _payload(marker), version))
    assert _runs(lambda: np.load(path, allow_pickle=True), marker)
    assert _flagged(_scan(path))


def test_dict_descr_is_judged(tmp_path: Path) -> None:
    # numpy 2.4 refuses a dict descr, another version may not: judge it anyway
    path = tmp_path / "d.npy"
    path.write_bytes(npy_bytes({"names": ["a"], "formats": ["O"]}, _payload(tmp_path / "m")))
    assert _flagged(_scan(path))


@pytest.mark.parametrize("descr", ["<f4", "|b1", "<U10", "<M8[ns]", ("<f4", (2, 3))], ids=repr)
def test_plain_descr_is_clean(tmp_path: Path, descr: Any) -> None:
    path = tmp_path / "p.npy"
    np.save(path, np.zeros(1, dtype=np.dtype(descr)))
    assert _scan(path) == []


@pytest.mark.parametrize("descr", ["weird", 7, ("O",), [("a",)]], ids=repr)
def test_unknown_descr_is_not_scanned_error(tmp_path: Path, descr: Any) -> None:
    path = tmp_path / "u.npy"
    path.write_bytes(npy_bytes(descr, _payload(tmp_path / "m")))
    found = _scan(path)
    assert found and all(f.severity == "error" for f in found)
    assert {f.kind for f in found} <= {"not-scanned", "malformed"}


def test_npz_members_plain_compressed_and_without_suffix(tmp_path: Path) -> None:
    for name, save in (("p.npz", np.savez), ("c.npz", np.savez_compressed)):
        marker = tmp_path / f"ran-{name}"
        path = tmp_path / name
        save(path, w=np.zeros(2), x=np.array([Touch(marker)], dtype=object))
        assert _runs(lambda path=path: np.load(path, allow_pickle=True)["x"], marker)
        found = _scan(path)
        assert _flagged(found) and {f.extra["member"] for f in found} == {"x.npy"}
    marker = tmp_path / "ran-bare"
    path = tmp_path / "bare.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        buf = io.BytesIO()
        np.save(buf, np.zeros(2))
        zf.writestr("w.npy", buf.getvalue())
        zf.writestr("x", npy_bytes("object", _payload(marker)))
    assert _runs(lambda: np.load(path, allow_pickle=True)["x"], marker)
    assert _flagged(_scan(path))


_LEAVES = st.sampled_from(
    ["<f4", "<i8", "|u1", "|b1", "<U3", "|S2", "<M8[s]", "O", "|O", "object", "<c16", "V4"]
)
_DESCRS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([(2,), (1, 2)])),
        st.lists(
            st.tuples(st.sampled_from(["a", "b", "c"]), inner),
            min_size=1,
            max_size=3,
            unique_by=lambda t: t[0],
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(_DESCRS)
def test_agrees_with_numpy(descr: Any) -> None:
    """Never 'plain' where numpy's descr_to_dtype says hasobject."""
    from numpy.lib.format import descr_to_dtype

    try:
        truth = descr_to_dtype(descr).hasobject
    except (TypeError, ValueError):
        truth = None
    try:
        ours = holds_objects(descr)
    except UnknownDescr:
        return
    if truth is not None:
        assert ours == truth
