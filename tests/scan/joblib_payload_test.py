"""joblib files: the pickle after array bytes is walked as ``joblib.load`` reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ftmanifest.findings import Finding
from ftmanifest.scan.artifacts.binary import scan_binary
from ftmanifest.scan.artifacts.sniff import detect_format

joblib = pytest.importorskip("joblib")
np = pytest.importorskip("numpy")


class Run:
    """Unpickling this runs ``exec``: it writes ``marker`` (the observable payload)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def _scan(path: Path) -> list[Finding]:
    return scan_binary(path, detect_format(path), None)


def _imports(found: list[Finding]) -> set[str]:
    return {f.observed or "" for f in found if f.rule == "pickle.unsafe-import"}


def _loaded_runs(path: Path, marker: Path) -> bool:
    joblib.load(path)
    return marker.exists() and marker.read_text() == "ran"


@pytest.mark.parametrize("compress", [0, 3, ("gzip", 3)])
def test_a_payload_after_array_bytes_is_named(tmp_path: Path, compress: Any) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "model.joblib"
    joblib.dump({"coef": np.arange(100.0), "hook": Run(marker)}, path, compress=compress)
    assert _loaded_runs(path, marker)
    found = _scan(path)
    assert "builtins.exec" in _imports(found), found
    assert all(f.severity == "error" for f in found if f.rule == "pickle.unsafe-import")


def test_a_payload_inside_an_object_array_is_named(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "objects.joblib"
    joblib.dump([np.arange(3), np.array([1, Run(marker)], dtype=object)], path)
    assert _loaded_runs(path, marker)
    assert "builtins.exec" in _imports(_scan(path))


@pytest.mark.parametrize(
    "value",
    [
        np.arange(10),
        {"w": np.ones((3, 4), dtype="float32"), "b": np.zeros(0), "s": np.float64(2.5)},
        [np.array(["ab", "cde"]), np.array([b"x", b"yz"]), np.array(True), np.arange(6.0)[::2]],
        np.zeros(3, dtype=[("a", "<i4"), ("b", ">f8")]),
        np.array(["2024-01-01"], dtype="datetime64[ns]"),
        np.arange(12, dtype=">i2").reshape(3, 4).T,
    ],
)
@pytest.mark.parametrize("compress", [0, 3])
def test_plain_joblib_array_files_are_clean(tmp_path: Path, value: Any, compress: int) -> None:
    path = tmp_path / "arrays.joblib"
    joblib.dump(value, path, compress=compress)
    joblib.load(path)  # a file the real loader reads
    assert _scan(path) == []


def test_an_array_size_that_cannot_be_told_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "odd.joblib"
    joblib.dump(np.arange(10), path)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"\x8c\x02i8", b"\x8c\x02x8", 1))  # no numpy type
    found = _scan(path)
    assert [f.rule for f in found if f.severity == "error"] == ["pickle.joblib-array"], found
    assert "x8" in found[0].message
