"""Tests for ftmanifest.counts: streaming counts equal the old loops, on any split."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ftmanifest.counts import (
    ACCEL_MIN,
    CsvCounter,
    LineCounter,
    RecordCountError,
    cache_key,
    count_file,
    counter_for,
    format_of,
)
from ftmanifest.errors import InputError, InputNotFoundError
from tests.conftest import within


def old_lines(data: bytes) -> int:
    """The loop ``observe.count_records`` used for jsonl/ndjson/text/txt."""
    return sum(1 for line in io.BytesIO(data) if line.strip())


def old_rows(data: bytes, delimiter: str) -> int:
    """``csv.reader`` rows of the file opened as ``count_records`` opened it, header kept."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline="")
    try:
        return sum(1 for _ in csv.reader(text, delimiter=delimiter))
    except csv.Error:  # NUL before 3.11: the old loop crashed; no reference to compare
        assume(False)
        raise


def feed(counter: Any, data: bytes, cuts: list[int]) -> int:
    """Feed ``data`` split at ``cuts`` (in any order, repeats give empty chunks)."""
    prev = 0
    for cut in [*sorted(cuts), len(data)]:
        counter.feed(memoryview(data[prev:cut]))
        prev = cut
    return int(counter.result())


# Bytes that matter to the counters, often, and anything else now and then.
_LINE_PIECES = [b"\n", b"\r\n", b"\r", b" ", b"\t", b"\x0b", b"\x0c", b"x", b"{}", b"\x00", b"\xff"]
_CSV_PIECES = [b'"', b'""', b",", b"\t", b"\r", b"\n", b"\r\n", b"a", b" ", b"\xc3\xa9", b"\xff"]


@st.composite
def split_bytes(draw: st.DrawFn, pieces: list[bytes]) -> tuple[bytes, list[int]]:
    parts = draw(st.lists(st.sampled_from(pieces) | st.binary(max_size=3), max_size=40))
    data = b"".join(parts)
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=6))
    return data, cuts


@settings(max_examples=400)
@given(split_bytes(_LINE_PIECES), st.sampled_from([False, True]))
def test_line_counter_equals_the_old_loop(case: tuple[bytes, list[int]], numpy: bool) -> None:
    data, cuts = case
    if numpy:
        pytest.importorskip("numpy")
    assert feed(LineCounter(accelerate=numpy), data, cuts) == old_lines(data)


@settings(max_examples=400)
@given(split_bytes(_CSV_PIECES), st.sampled_from([",", "\t"]))
def test_csv_counter_equals_csv_reader(case: tuple[bytes, list[int]], delimiter: str) -> None:
    data, cuts = case
    counter = CsvCounter(delimiter.encode(), header=False)
    assert feed(counter, data, cuts) == old_rows(data, delimiter)


@pytest.mark.parametrize(
    ("data", "want"),
    [
        (b"", 0),
        (b"a", 1),  # last line without a newline
        (b"a\n\n \n\t\r\n\x0b\x0c\nb", 2),  # empty and whitespace-only lines
        (b"a\r\nb\r\n", 2),  # CRLF
        (b"\n\n", 0),
        (b"  x  \n", 1),
        (b"\x1c\n\x85\n", 2),  # not ASCII whitespace for bytes.strip
    ],
)
def test_line_counter_examples(data: bytes, want: int) -> None:
    assert old_lines(data) == want
    for numpy in (False, True):
        for cut in range(len(data) + 1):  # every single split point
            assert feed(LineCounter(accelerate=numpy), data, [cut]) == want


def test_blank_lines_on_large_chunk_boundaries() -> None:
    """The numpy path (chunks >= ACCEL_MIN) with blank lines right at the seams."""
    pytest.importorskip("numpy")
    line = b'{"text": "%d"}\n'
    body = b"".join(line % i for i in range(40_000))
    seam = body.index(b"\n", len(body) // 2) + 1  # a line boundary
    data = body[:seam] + b"\n  \n\r\n" + body[seam:] + b"\n \t"
    cuts = [seam, seam + 1, seam + 3, len(data) - 1]
    assert len(data) - seam > ACCEL_MIN
    assert feed(LineCounter(), data, cuts) == old_lines(data) == 40_000


@pytest.mark.parametrize(
    ("data", "want"),
    [
        (b"h\n1\n2\n", 2),
        (b'h\n"a\nb",1\n"c""\r\n",2', 2),  # quoted newlines, doubled quotes
        (b'h\nab"c,d\n"x\n', 2),  # a quote inside a field is a literal; an open quote at the end
        (b"h\n\n\n", 2),  # empty lines are rows (csv.reader yields [])
        (b"h", 0),
        (b"", 0),
    ],
)
def test_csv_examples(data: bytes, want: int) -> None:
    assert max(0, old_rows(data, ",") - 1) == want
    for cut in range(len(data) + 1):
        assert feed(counter_for("csv"), data, [cut]) == want


def test_counter_for_and_cache_keys() -> None:
    for fmt in ("jsonl", "NDJSON", "text", "txt"):
        assert isinstance(counter_for(fmt), LineCounter)
        assert cache_key(fmt) == "lines/1"
    assert isinstance(counter_for("tsv"), CsvCounter) and cache_key("tsv") == "tsv/1"
    for fmt in ("json", "parquet", "bin", ""):
        assert counter_for(fmt) is None
    assert cache_key("json") == "json/1" and cache_key("bin") is None
    assert format_of(Path("d/x.JSONL")) == "jsonl" and format_of(Path("x.bin"), "CSV") == "csv"


# --- whole files ----------------------------------------------------------------


def test_count_file_streaming_formats(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_bytes(b'{"a": 1}\n\n{"a": 2}')
    assert count_file(p, "jsonl") == 2
    p.write_bytes(b'h\n1,"x\ny"\n2,z\n')
    assert count_file(p, "csv") == 2
    assert count_file(p, "bin") is None


def test_count_file_json(tmp_path: Path) -> None:
    p = tmp_path / "d.json"
    p.write_text(json.dumps([{"a": 1}, {"a": 2}, 3]))
    assert count_file(p, "json") == 3
    p.write_text('{"a": [1, 2]}')
    assert count_file(p, "json") == 1
    p.write_text("[1, 2")
    with pytest.raises(RecordCountError) as info:
        count_file(p, "json")
    assert isinstance(info.value, InputError) and info.value.path == str(p)


def test_count_file_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": list(range(7))}), p)
    assert count_file(p, "parquet") == 7
    p.write_bytes(b"not parquet at all")
    with pytest.raises(RecordCountError):
        count_file(p, "parquet")


def test_count_file_missing_and_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError):
        count_file(tmp_path / "nope.jsonl", "jsonl")
    with pytest.raises(RecordCountError, match="not a regular file"):
        count_file(tmp_path, "jsonl")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_count_file_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for fmt in ("jsonl", "json"):
        with pytest.raises(RecordCountError, match="not a regular file"):
            within(10, lambda fmt=fmt: count_file(fifo, fmt))  # type: ignore[misc]


@pytest.mark.skipif(sys.platform != "linux", reason="uses /dev/null")
def test_count_file_never_reads_a_device() -> None:
    with pytest.raises(RecordCountError, match="not a regular file"):
        within(10, lambda: count_file("/dev/zero", "jsonl"))  # /dev/zero would never end


def test_counting_a_whole_small_file_agrees_with_the_streaming_counter() -> None:
    """``count_whole`` (one split for a few lines) is the streaming count, exactly."""
    import random

    from ftmanifest.counts import count_whole, counter_for

    rng = random.Random(31)
    pieces = [b'{"a": 1}', b"", b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"x", b" y ", b"\xc3\xa9"]
    cases = [b"", b"\n", b"\n\n", b"a", b"a\n", b" \n", b"\r\n", b"a\r\nb"]
    for _ in range(400):
        lines = [
            b"".join(rng.choices(pieces, k=rng.randint(0, 3))) for _ in range(rng.randint(0, 30))
        ]
        cases.append(b"\n".join(lines) + rng.choice([b"", b"\n"]))
    for data in cases:
        for kind in ("jsonl", "TXT", "csv"):
            counter = counter_for(kind)
            assert counter is not None
            counter.feed(memoryview(data))
            assert count_whole(kind, data) == counter.result(), (kind, data)
    assert count_whole("parquet", b"x") is None
