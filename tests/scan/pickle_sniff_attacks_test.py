"""Pickles that do not look like pickles are still judged as pickles.

Each attack is proved real first: CPython's own unpickler (or ``torch.load``)
runs its payload, which only touches a marker file in ``tmp_path``.  Then the
sniffer must not call it text, and the real scan entry point must report an
error for it - an unsafe import, or ``not-scanned`` where a cap was hit.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import struct
from pathlib import Path

import pytest
import torch

from ftmanifest.scan.artifacts.pickle_allowlist import judge_run
from ftmanifest.scan.artifacts.pickle_sequence import TORCH_MAGIC, walk_pickles
from ftmanifest.scan.artifacts.sniff import detect_format
from ftmanifest.scan.engine import ScanOptions, scan_paths

MAGIC = TORCH_MAGIC.to_bytes(10, "little")


def touch(marker: Path) -> bytes:
    """Protocol-0 gadget: getattr(pathlib.Path(marker), 'touch')()."""
    return b"cbuiltins\ngetattr\n(cpathlib\nPath\n(V" + str(marker).encode() + b"\ntRVtouch\ntR)R."


def _framed(body: bytes) -> bytes:
    return b"\x80\x04\x95" + struct.pack("<Q", len(body)) + body


ATTACKS = {
    # header spellings and first opcodes the old sniffer did not expect
    "proto1": lambda g: b"\x80\x01" + g,
    "proto0": lambda g: b"\x80\x00" + g,
    "proto1-binput": lambda g: b"\x80\x01}q\x000" + g,
    "frame-without-proto": lambda g: b"\x95" + struct.pack("<Q", len(g)) + g,
    "binfloat-first": lambda g: b"G" + struct.pack(">d", 1.5) + b"0" + g,
    "binint2-first": lambda g: b"M\x01\x000" + g,
    "short-binbytes-first": lambda g: b"C\x03abc0" + g,
    "long1-first": lambda g: b"\x8a\x01\x050" + g,
    "empty-set-first": lambda g: b"\x8f0" + g,
    # BUILD on an imported class early on: the old sniffer called that text
    "build-on-global": lambda g: b"cpathlib\nPath\n}b0" + g,
    # more opcodes before the payload than the old sniffer's 100,000 cap
    "many-opcodes": lambda g: b"(" + b"N" * 100_001 + b"1" + g,
    # a first argument longer than the old 1 MiB probe
    "long-first-unicode": lambda g: b"V" + b"a" * ((1 << 20) + 10) + b"\n0" + g,
    "long-first-string": lambda g: b"S'" + b"a" * ((1 << 20) + 10) + b"'\n0" + g,
    # a 70 KB protocol-0 number line (strtol reads the zeros as octal: value 1)
    "70kb-int": lambda g: b"I" + b"0" * 70_000 + b"1\n0" + g,
    "70kb-int-spaces": lambda g: b"I" + b" " * 70_000 + b"1\n0" + g,
}


def _proves_execution(data: bytes, marker: Path) -> None:
    """The real unpickler runs the payload (it may fail later; the harm is done)."""
    with contextlib.suppress(Exception):
        pickle.load(io.BytesIO(data))
    assert marker.exists(), "the gadget did not run in CPython's unpickler"
    marker.unlink()


def _errors(path: Path) -> list[tuple[str, str]]:
    found = scan_paths([path], ScanOptions(jobs=1)).findings
    return [(f.kind, f.rule) for f in found if f.severity == "error"]


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_prefix_attacks_are_pickles(tmp_path: Path, name: str) -> None:
    marker = tmp_path / "ran"
    data = ATTACKS[name](touch(marker))
    _proves_execution(data, marker)
    for suffix in (".txt", ".json", ".bin"):
        path = tmp_path / f"data{suffix}"
        path.write_bytes(data)
        assert detect_format(path) == "pickle", suffix
        errors = _errors(path)
        assert ("unsafe-pickle", "pickle.unsafe-import") in errors, (suffix, errors)


def test_over_the_walk_cap_is_not_scanned_error(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    data = b"(" + b"N" * 2_000_001 + b"1" + touch(marker)
    _proves_execution(data, marker)
    path = tmp_path / "notes.txt"
    path.write_bytes(data)
    assert detect_format(path) == "pickle"
    found = scan_paths([path], ScanOptions(jobs=1)).findings
    capped = [f for f in found if f.kind == "not-scanned"]
    assert capped and all(f.severity == "error" for f in capped)
    assert "max_opcodes" in capped[0].message


def test_70kb_int_that_cpython_refuses_is_not_a_pickle(tmp_path: Path) -> None:
    # 70,000 non-zero digits: over int_max_str_digits, yet a loader may lift that limit
    data = b"I" + b"7" * 70_000 + b"\n0cos\nsystem\n(Vtrue\ntR."
    path = tmp_path / "n.txt"
    path.write_bytes(data)
    assert detect_format(path) == "pickle"


# -- legacy torch files with the magic number spelled in other opcodes (item 3) -------
MAGIC_SPELLINGS = {
    "binput": b"\x80\x02\x8a\x0a" + MAGIC + b"q\x00.",
    "long4": b"\x80\x02\x8b" + struct.pack("<i", 10) + MAGIC + b".",
    "int-hex": b"I0x1950A86A20F9469CFC6C\n.",
    "long-memo": b"L" + str(TORCH_MAGIC).encode() + b"L\np0\n.",
    "framed": _framed(b"\x8a\x0a" + MAGIC + b"\x94."),
    "mark-pop": b"(N1\x80\x02\x8a\x0a" + MAGIC + b".",
}


@pytest.mark.parametrize("spelling", sorted(MAGIC_SPELLINGS))
def test_legacy_torch_with_respelled_magic(tmp_path: Path, spelling: str) -> None:
    marker = tmp_path / "ran"
    head = MAGIC_SPELLINGS[spelling]
    assert pickle.loads(head) == TORCH_MAGIC
    rest = [1001, {"protocol_version": 1001, "little_endian": True}]
    data = head + b"".join(pickle.dumps(p, protocol=2) for p in rest)
    data += touch(marker) + pickle.dumps([], protocol=2)
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(data)
    with contextlib.suppress(Exception):
        torch.load(path, weights_only=False)
    assert marker.exists(), "torch.load did not run the fourth pickle"
    assert detect_format(path) == "torch-legacy"
    assert ("unsafe-pickle", "pickle.unsafe-import") in _errors(path)


# -- data after STOP (item 5) --------------------------------------------------------
def test_walk_pickles_walks_a_second_pickle(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    data = pickle.dumps({"a": 1}, protocol=4) + touch(marker)
    run = walk_pickles(io.BytesIO(data))
    assert len(run.walks) == 2 and run.trailing is None
    assert [i.dotted for i in run.walks[1].imports] == [
        "builtins.getattr",
        "pathlib.Path",
    ]
    rules = {f.rule for f in judge_run(run, path="x")}
    assert "pickle.unsafe-import" in rules


def test_walk_pickles_reports_trailing_bytes() -> None:
    first = pickle.dumps([1, 2], protocol=2)
    run = walk_pickles(io.BytesIO(first + b"{not a pickle}"))
    assert len(run.walks) == 1 and run.trailing == len(first)
    found = judge_run(run, path="x")
    assert [(f.rule, f.severity) for f in found] == [("pickle.trailing-data", "warning")]
    assert found[0].extra["offset"] == len(first)
    clean = walk_pickles(io.BytesIO(first))
    assert clean.trailing is None and judge_run(clean, path="x") == []


def test_walk_pickles_legacy_count_leaves_raw_tail() -> None:
    parts = [TORCH_MAGIC, 1001, {}, {"w": 1}, ["0"]]
    data = b"".join(pickle.dumps(p, protocol=2) for p in parts) + b"\x00" * 40
    run = walk_pickles(io.BytesIO(data), count=5)
    assert len(run.walks) == 5 and run.trailing == len(data) - 40
    assert judge_run(run, path="x", main=3, raw_tail=True) == []


def test_second_pickle_found_by_the_scan(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"a": 1}, protocol=2) + touch(marker))
    assert ("unsafe-pickle", "pickle.unsafe-import") in _errors(path)
