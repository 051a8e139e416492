"""``data check --write-clean``: streamed, byte for byte, refused when the input moved."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ftmanifest.data import leak_report, leakage
from ftmanifest.data.check import check_data
from ftmanifest.data.clean import fingerprint, write_clean
from ftmanifest.errors import InputError
from ftmanifest.hashing.files import hash_file
from tests.data.leakage_test import MANIFEST, chat


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_crlf_blank_lines_and_a_last_line_without_newline(tmp_path: Path) -> None:
    src = tmp_path / "train.jsonl"
    lines = [
        b'{"text": "one"}\r\n',
        b"\r\n",  # blank: not a record
        b'{"text": "two"}\r\n',
        b'  {"text":"three"}  \n',
        b"   \n",
        b'{"text": "four"}\r\n',
        b'{"text": "five"}',  # no line end
    ]
    src.write_bytes(b"".join(lines))
    out = tmp_path / "clean.jsonl"
    digest = write_clean(src, None, {2, 5}, out).digest
    assert out.read_bytes() == b"".join(lines[i] for i in (0, 1, 3, 4, 5))
    assert digest == hash_file(out, use_cache=False).digest
    write_clean(src, None, {1, 4}, out)
    assert out.read_bytes() == b"".join(lines[i] for i in (1, 2, 3, 4, 6))
    assert _leftovers(tmp_path) == []


def test_csv_quoted_cells_spanning_lines(tmp_path: Path) -> None:
    src = tmp_path / "train.csv"
    rows = [
        "prompt,completion\r\n",
        'a,"first\r\nsecond"\r\n',
        'b,"x ""quoted""\nand\nmore"\r\n',
        "c,plain\r\n",
        'd,"last\r\nrow, no end"',
    ]
    src.write_bytes("".join(rows).encode())
    out = tmp_path / "clean.csv"
    write_clean(src, None, {2, 4}, out)  # a middle row over three lines, the last row
    assert out.read_bytes() == "".join(rows[i] for i in (0, 1, 3)).encode()
    write_clean(src, None, {1}, out)
    assert out.read_bytes() == "".join(rows[i] for i in (0, 2, 3, 4)).encode()


@pytest.mark.parametrize("change", ["append", "same size", "touch"])
def test_an_input_changed_after_the_check_is_refused(tmp_path: Path, change: str) -> None:
    src = tmp_path / "train.jsonl"
    src.write_bytes(b'{"text": "one"}\n{"text": "two"}\n')
    out = tmp_path / "clean.jsonl"
    out.write_bytes(b"earlier copy\n")
    before = fingerprint(src)
    if change == "append":
        with open(src, "ab") as f:
            f.write(b'{"text": "three"}\n')
    elif change == "same size":
        src.write_bytes(b'{"text": "owt"}\n{"text": "one"}\n')
    else:
        st = src.stat()
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with pytest.raises(InputError, match="changed while it was checked"):
        write_clean(src, None, {1}, out, before)
    assert out.read_bytes() == b"earlier copy\n"  # untouched
    assert _leftovers(tmp_path) == []


def test_check_refuses_a_training_file_written_during_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    splits = {
        "train": [chat("same words here"), chat("other")],
        "eval": [chat("unrelated")],
        "test": [chat("same words here")],
    }
    for name, records in splits.items():
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(MANIFEST.format(ext="jsonl", sealed="false"))
    real = leakage.check_leakage

    def check_then_write(*args: object, **kw: object) -> leak_report.LeakageReport:
        report = real(*args, **kw)  # type: ignore[arg-type]
        with open(tmp_path / "train.jsonl", "ab") as f:
            f.write(b'{"text": "appended meanwhile"}\n')
        return report

    monkeypatch.setattr(leakage, "check_leakage", check_then_write)
    with pytest.raises(InputError, match="changed while it was checked"):
        check_data(manifest, jobs=1, write_clean_to=tmp_path / "clean.jsonl")
    assert not (tmp_path / "clean.jsonl").exists()


@pytest.mark.parametrize(("mode", "expect"), [(0o600, 0o600), (0o640, 0o640), (0o755, 0o644)])
def test_the_copy_is_readable_by_whom_the_input_is(tmp_path: Path, mode: int, expect: int) -> None:
    src = tmp_path / "train.jsonl"
    src.write_bytes(b'{"text": "one"}\n')
    src.chmod(mode)
    out = tmp_path / "clean.jsonl"
    write_clean(src, None, set(), out)
    assert stat.S_IMODE(out.stat().st_mode) == expect


def test_the_copy_is_streamed_not_held(tmp_path: Path) -> None:
    import tracemalloc

    src = tmp_path / "train.jsonl"
    line = json.dumps({"text": "word " * 40}).encode() + b"\n"
    src.write_bytes(line * 40_000)  # ~8 MB
    out = tmp_path / "clean.jsonl"
    tracemalloc.start()
    try:
        write_clean(src, None, {2, 40_000}, out)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3_000_000, peak
    assert out.stat().st_size == len(line) * 39_998


def test_an_output_folder_is_a_clean_error(tmp_path: Path) -> None:
    src = tmp_path / "train.jsonl"
    src.write_bytes(b'{"text": "one"}\n')
    (tmp_path / "out").mkdir()
    from ftmanifest.fsutil import WriteError

    with pytest.raises(WriteError, match="directory"):
        write_clean(src, None, set(), tmp_path / "out")


def test_an_output_that_links_to_the_input_is_refused(tmp_path: Path) -> None:
    from ftmanifest.errors import UsageError

    src = tmp_path / "train.jsonl"
    src.write_bytes(b'{"text": "one"}\n{"text": "two"}\n')
    link = tmp_path / "clean.jsonl"
    link.symlink_to(src)
    with pytest.raises(UsageError, match="training file itself"):
        write_clean(src, None, {1}, link)
    assert src.read_bytes() == b'{"text": "one"}\n{"text": "two"}\n'
    other = tmp_path / "elsewhere.jsonl"
    other.write_bytes(b"keep me\n")
    link.unlink()
    link.symlink_to(other)
    write_clean(src, None, {1}, link)  # the link is replaced, never written through
    assert other.read_bytes() == b"keep me\n"
    assert not link.is_symlink() and link.read_bytes() == b'{"text": "two"}\n'
