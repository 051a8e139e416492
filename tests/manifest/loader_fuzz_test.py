"""Hypothesis: arbitrary bytes and mutated manifests give a manifest or a clean,
located error - never a traceback."""

from __future__ import annotations

import io
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.cli import main
from ftmanifest.errors import FtManifestError, ManifestError, ManifestInvalidError
from ftmanifest.manifest import load_manifest
from tests.conftest import EXAMPLES

TEXTS = [p.read_bytes() for p in EXAMPLES]
# Errors that concern the whole file rather than one place in it.
UNLOCATED = (
    "too large",
    "too many values",
    "too deeply nested",
    "NaN",
    "is not allowed",
    "YAML syntax",
    "is a directory",
)
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _check(raw: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"m{suffix}"
        path.write_bytes(raw)
        try:
            load_manifest(path)
        except ManifestInvalidError as exc:
            assert exc.problems
            assert all(p.path == str(path) and p.line is not None for p in exc.problems)
        except ManifestError as exc:
            assert exc.path == str(path)
            assert exc.line is not None or any(u in exc.message for u in UNLOCATED), exc.message
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["lint", str(path)])
        assert code in (0, 1, 2)
        assert "internal error" not in err.getvalue()


@st.composite
def mutated_manifest(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(TEXTS)))
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "dup-line"]))
        if action == "flip" and pos < len(data):
            data[pos] = draw(st.integers(0, 255))
        elif action == "insert":
            data[pos:pos] = draw(
                st.sampled_from(
                    [
                        b":",
                        b"-",
                        b"{",
                        b"[",
                        b"\n",
                        b"  ",
                        b"&a ",
                        b"*a",
                        b"!!str ",
                        b"'",
                        b"\t",
                        b"#",
                        b"\x00",
                        b"\xff",
                        b"null",
                        b"1e999",
                        b".nan",
                        b"<<: {}",
                        b"? ",
                    ]
                )
            )
        elif action == "delete" and pos < len(data):
            del data[pos : pos + draw(st.integers(1, 40))]
        elif action == "dup-line":
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end + 1
            data[end:end] = data[start:end]
    return bytes(data)


@SETTINGS
@given(st.binary(max_size=2048), st.sampled_from([".yaml", ".json", ".toml"]))
def test_arbitrary_bytes(raw: bytes, suffix: str) -> None:
    _check(raw, suffix)


@SETTINGS
@given(st.text(max_size=400), st.sampled_from([".yaml", ".json", ".toml"]))
def test_arbitrary_text(text: str, suffix: str) -> None:
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    _check(raw, suffix)


@SETTINGS
@given(mutated_manifest())
def test_mutated_manifests(raw: bytes) -> None:
    _check(raw, ".yaml")


def test_errors_are_all_of_our_hierarchy() -> None:
    assert issubclass(ManifestError, FtManifestError)
