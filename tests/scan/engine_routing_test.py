"""The scan command reaches the container judges: compressed pickles through the CLI,
with text inside gzip keeping its line numbers."""

from __future__ import annotations

import bz2
import gzip
import lzma
import pickle
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from ftmanifest.scan.engine import ScanOptions, scan_paths
from tests.conftest import run_cli


class _Touch:
    """A gadget whose effect is harmless and visible: it creates a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return (Path.touch, (self.marker,))


TEXT = "line one\nmail jane.doe@mailbox.org\n"

COMPRESSORS: dict[str, tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]] = {
    "gz": (gzip.compress, gzip.decompress),
    "bz2": (bz2.compress, bz2.decompress),
    "xz": (lzma.compress, lzma.decompress),
    "zlib": (zlib.compress, zlib.decompress),
}


@pytest.mark.parametrize("protocol", [0, 2, 4])
@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_compressed_gadget_is_flagged_by_the_cli(
    tmp_path: Path, suffix: str, protocol: int
) -> None:
    marker = tmp_path / "ran"
    compress, decompress = COMPRESSORS[suffix]
    blob = compress(pickle.dumps({"w": _Touch(marker)}, protocol=protocol))
    pickle.loads(decompress(blob))  # the real loader runs it: the file is dangerous
    assert marker.exists()
    target = tmp_path / f"weights.{suffix}"
    target.write_bytes(blob)
    result = run_cli("scan", str(target), "--no-cache")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pickle.unsafe-import" in result.stdout


def test_gzip_text_keeps_its_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl.gz"
    lines = [b'{"t": "hello"}\n'] * 4 + [b'{"t": "mail jane.doe@mailbox.org"}\n']
    path.write_bytes(gzip.compress(b"".join(lines)))
    found = scan_paths([path], ScanOptions(jobs=1)).findings
    assert [(f.rule, f.line) for f in found] == [("pii.email", 5)]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("u32be.txt", b"\x00\x00\xfe\xff" + TEXT.encode("utf-32-be")),
        ("u32le.txt", b"\xff\xfe\x00\x00" + TEXT.encode("utf-32-le")),
        ("u16be.txt", b"\xfe\xff" + TEXT.encode("utf-16-be")),
        ("u16-no-bom.txt", TEXT.encode("utf-16-le")),
    ],
)
def test_wide_text_reaches_the_text_scanner(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    found = scan_paths([path], ScanOptions(jobs=1)).findings
    assert [(f.rule, f.line) for f in found] == [("pii.email", 2)]


def test_text_that_spells_a_global_with_no_attribute_stays_text(tmp_path: Path) -> None:
    """'c' + 'hanged' + newline + 'and longer': CPython imports 'hanged', then getattr fails
    before anything is called, so no loader acts on it."""
    path = tmp_path / "eval.jsonl"
    path.write_bytes(b"changed\nand longer\n")
    with pytest.raises((ModuleNotFoundError, AttributeError)):
        pickle.loads(path.read_bytes())
    assert scan_paths([path], ScanOptions(jobs=1)).findings == []


def test_json_escapes_glued_to_a_value_hide_nothing(tmp_path: Path) -> None:
    """``\\n`` before a token and ``\\"`` around a password: blanked in place, one scan."""
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    path = tmp_path / "chat.jsonl"
    path.write_bytes(
        ('{"t": "key:\\n' + token + '"}\n').encode()
        + b'{"t": "config: password=\\"Xk9#mQ2$vL7pR4wZ\\" done"}\n'
    )
    found = scan_paths([path], ScanOptions(jobs=1)).findings
    assert [(f.line, f.rule) for f in found] == [
        (1, "secret.github-pat"),
        (2, "secret.generic-assignment"),
    ]
    assert found[0].column == 14  # where the token starts in the file, escapes counted


def test_a_zip_that_zipfile_refuses_to_open_is_a_finding(tmp_path: Path) -> None:
    """Central directory 'version needed' 6.4: ZipFile() raised NotImplementedError."""
    import zipfile

    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"w": 1}, protocol=2))
    data = bytearray(path.read_bytes())
    central = data.index(b"PK\x01\x02")
    data[central + 6] = 64  # version needed to extract
    path.write_bytes(bytes(data))
    with pytest.raises(NotImplementedError):
        zipfile.ZipFile(path)
    found = scan_paths([path], ScanOptions(jobs=1)).findings
    assert [(f.rule, f.severity) for f in found] == [("zip.unreadable", "error")]
