"""Tests for ftmanifest.recordio: the one record reader, against the one record count."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.counts import count_file
from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.recordio import (
    FORMATS,
    Limits,
    MalformedRecordError,
    Record,
    RecordEncodingError,
    RecordReadError,
    RecordTooLargeError,
    UnsupportedFormatError,
    iter_records,
    text_fields,
)
from tests.conftest import within


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def records(path: Path, fmt: str | None = None, **limits: Any) -> list[Record]:
    return list(iter_records(path, fmt, limits=Limits(**limits)))


def shape(path: Path, fmt: str | None = None) -> list[tuple[int, int, Any]]:
    return [(r.number, r.line, r.value) for r in records(path, fmt)]


# --- formats and numbering ------------------------------------------------------


def test_jsonl_numbers_records_and_lines(tmp_path: Path) -> None:
    data = b'{"a": 1}\r\n\n \t\r\n[1, "x"]\n\x0b\n"last"'
    path = write(tmp_path, "d.jsonl", data)
    assert shape(path) == [(1, 1, {"a": 1}), (2, 4, [1, "x"]), (3, 6, "last")]
    assert shape(write(tmp_path, "d.ndjson", data)) == shape(path)
    assert count_file(path, "jsonl") == 3


def test_jsonl_reads_a_bom_and_nan_as_json_does(tmp_path: Path) -> None:
    path = write(tmp_path, "d.jsonl", b'\xef\xbb\xbf{"a": NaN}\n')
    (rec,) = records(path)
    assert rec.value["a"] != rec.value["a"]


def test_text_lines_drop_their_line_end_only(tmp_path: Path) -> None:
    path = write(tmp_path, "d.txt", b"  hello \r\n\r\n\tworld\n \nend")
    assert shape(path) == [(1, 1, "  hello "), (2, 3, "\tworld"), (3, 5, "end")]
    assert shape(path, "text") == shape(path)


def test_csv_header_rows_and_line_of_each_row(tmp_path: Path) -> None:
    data = b'q,a\r\n"multi\nline, quoted",yes\r\n\r\nx,y,extra\nshort\r"no end'
    path = write(tmp_path, "d.csv", data)
    assert shape(path) == [
        (1, 2, {"q": "multi\nline, quoted", "a": "yes"}),
        (2, 4, {}),  # an empty line is a row, as csv.reader (and the count) have it
        (3, 5, {"q": "x", "a": "y", 2: "extra"}),
        (4, 6, {"q": "short"}),
        (5, 6, {"q": "no end"}),  # a lone \r ends a row inside the 6th \n-line
    ]
    assert count_file(path, "csv") == 5


def test_tsv_and_a_declared_format_override_the_suffix(tmp_path: Path) -> None:
    path = write(tmp_path, "d.data", b"a\tb\n1\t2,3\n")
    assert shape(path, "TSV") == [(1, 2, {"a": "1", "b": "2,3"})]
    assert shape(path, "csv") == [(1, 2, {"a\tb": "1\t2", 1: "3"})]


def test_csv_reads_a_field_longer_than_the_default_field_limit(tmp_path: Path) -> None:
    old = csv.field_size_limit(131072)  # the default; an earlier read may have raised it
    try:
        big = "x" * 200_000
        path = write(tmp_path, "d.csv", f"a\n{big}\n".encode())
        assert [r.value for r in records(path)] == [{"a": big}]
        assert csv.field_size_limit() == Limits().record_bytes
    finally:
        csv.field_size_limit(max(old, csv.field_size_limit()))


def test_json_list_elements_and_a_single_document(tmp_path: Path) -> None:
    path = write(tmp_path, "d.json", b'[\n {"a": "x"},\n 2,\n [] \n]')
    assert shape(path) == [(1, 1, {"a": "x"}), (2, 2, 2), (3, 3, [])]
    single = write(tmp_path, "o.json", '{"k": "v"}'.encode("utf-16"))
    assert shape(single) == [(1, 1, {"k": "v"})]
    assert count_file(single, "json") == 1
    assert shape(write(tmp_path, "e.json", b"[]")) == []


def test_parquet_rows(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {"id": i, "messages": [{"role": "user", "content": f"hi {i}"}], "blob": b"\x00"}
        for i in range(2500)
    ]
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1000)
    got = records(path)
    assert [(r.number, r.line) for r in got] == [(i, i) for i in range(1, 2501)]
    assert [r.value for r in got] == rows
    assert got[7].text_fields() == [
        (("messages", 0, "role"), "user"),
        (("messages", 0, "content"), "hi 7"),
    ]
    assert count_file(path, "parquet") == 2500


def test_formats_are_the_ones_records_counts() -> None:
    from ftmanifest.counts import cache_key

    assert FORMATS == {"jsonl", "ndjson", "text", "txt", "csv", "tsv", "json", "parquet"}
    assert all(cache_key(kind) is not None for kind in FORMATS - {"parquet"})


# --- text fields ----------------------------------------------------------------


def test_text_fields_are_string_leaves_with_their_paths() -> None:
    value = {"messages": [{"role": "user", "content": "hi"}], "n": 1, "ok": True,
             "none": None, "raw": b"x", "tags": ["a", ["b"]], "": "empty key"}  # fmt: skip
    assert list(text_fields(value)) == [
        (("messages", 0, "role"), "user"),
        (("messages", 0, "content"), "hi"),
        (("tags", 0), "a"),
        (("tags", 1, 0), "b"),
        (("",), "empty key"),
    ]
    assert list(text_fields("plain")) == [((), "plain")]
    assert list(text_fields(7)) == []


def test_text_fields_walk_deep_values_without_recursion() -> None:
    value: Any = "leaf"
    for _ in range(sys.getrecursionlimit() * 2):
        value = [value]
    ((path, text),) = text_fields(value)
    assert text == "leaf" and len(path) == sys.getrecursionlimit() * 2


# --- errors ---------------------------------------------------------------------


def fails(
    kind: type[RecordReadError], path: Path, fmt: str | None = None, **limits: Any
) -> RecordReadError:
    with pytest.raises(kind) as info:
        records(path, fmt, **limits)
    err = info.value
    assert isinstance(err, InputError) and err.exit_code == 2
    assert err.path == str(path) and str(path) in err.message and err.hint
    return err


def test_a_malformed_jsonl_line_names_its_line_and_column(tmp_path: Path) -> None:
    err = fails(MalformedRecordError, write(tmp_path, "d.jsonl", b'{"a": 1}\n\n{"a": }\n'))
    assert (err.line, err.column) == (3, 7) and err.reason == "malformed-record"
    assert f"{tmp_path / 'd.jsonl'}:3" in err.message and "Expecting value" in err.message


def test_a_malformed_json_document_names_its_line(tmp_path: Path) -> None:
    err = fails(MalformedRecordError, write(tmp_path, "d.json", b"[1,\n2,\n}"))
    assert err.line == 3


def test_a_duplicate_json_key_is_refused(tmp_path: Path) -> None:
    err = fails(MalformedRecordError, write(tmp_path, "d.jsonl", b'{}\n{"a": 1, "a": 2}\n'))
    assert err.line == 2 and "duplicate key 'a'" in err.message
    fails(MalformedRecordError, write(tmp_path, "d.json", b'[{"b": {"a": 1, "a": 2}}]'))


def test_a_duplicate_csv_header_column_is_refused(tmp_path: Path) -> None:
    err = fails(MalformedRecordError, write(tmp_path, "d.csv", b"q,a,q\n1,2,3\n"))
    assert err.line == 1 and "'q'" in err.message
    # a file that starts with an empty line has an empty header: every cell is extra
    path = write(tmp_path, "e.csv", b"\nq,a,q\n")
    assert shape(path) == [(1, 2, {0: "q", 1: "a", 2: "q"})]


def test_invalid_utf8_names_line_and_byte(tmp_path: Path) -> None:
    for name in ("d.jsonl", "d.txt", "d.csv", "d.tsv"):
        err = fails(RecordEncodingError, write(tmp_path, name, b'"ok"\n\n"b\xffd"\n'))
        assert (err.line, err.column) == (3, 3), name
        assert err.reason == "not-utf8" and "not UTF-8" in err.message
    err = fails(RecordEncodingError, write(tmp_path, "d.json", b'[\n"\xc3"]'))
    assert err.line == 2


def test_json_nested_too_deeply_is_an_input_error(tmp_path: Path) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    err = fails(MalformedRecordError, write(tmp_path, "d.jsonl", b"1\n" + deep + b"\n"))
    assert err.line == 2 and "nested too deeply" in err.message
    fails(MalformedRecordError, write(tmp_path, "d.json", deep))


def test_a_line_over_the_record_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "d.jsonl", b"1234\n123456\n")
    assert len(records(path, record_bytes=6)) == 2  # 6 bytes and its \n: at the limit
    err = fails(RecordTooLargeError, path, record_bytes=5)
    assert err.line == 2 and "5-byte record limit" in err.message and err.reason == "too-large"
    fails(RecordTooLargeError, write(tmp_path, "d.txt", b"x" * 100), record_bytes=10)


def test_a_csv_row_over_the_record_limit_across_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "d.csv", b'h\n"open\n' + b"more\n" * 100)  # a quote never closed
    err = fails(RecordTooLargeError, path, record_bytes=64)
    assert err.line == 2
    assert len(records(path, record_bytes=1000)) == 1


def test_a_file_over_the_total_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "d.jsonl", b"1\n" * 100)
    assert len(records(path, total_bytes=200)) == 100
    err = fails(RecordTooLargeError, path, total_bytes=199)
    assert err.line == 100
    fails(
        RecordTooLargeError, write(tmp_path, "d.json", b"[" + b"1," * 99 + b"1]"), total_bytes=100
    )
    fails(RecordTooLargeError, write(tmp_path, "e.json", b"[1, 2]"), document_bytes=5)


def test_parquet_errors(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    fails(MalformedRecordError, write(tmp_path, "bad.parquet", b"PAR1 not really PAR1"))
    path = tmp_path / "twice.parquet"
    pq.write_table(pa.table([pa.array([1]), pa.array([2])], names=["a", "a"]), path)
    assert "'a'" in fails(MalformedRecordError, path).message
    pq.write_table(pa.table({"a": [1]}), path)
    fails(RecordTooLargeError, path, total_bytes=10)


def test_an_unknown_format_is_refused_before_opening(tmp_path: Path) -> None:
    err = fails(UnsupportedFormatError, tmp_path / "missing.xlsx")
    assert "'xlsx'" in err.message and err.reason == "unsupported-format"


def test_a_missing_file_and_a_folder(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError):
        records(tmp_path / "nope.jsonl")
    err = fails(RecordReadError, tmp_path, "jsonl")
    assert err.observed == "not a regular file"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for fmt in sorted(FORMATS):
        with pytest.raises(RecordReadError, match="not a regular file"):
            within(10, lambda fmt=fmt: records(fifo, fmt))  # type: ignore[misc]


@pytest.mark.skipif(sys.platform != "linux", reason="uses /dev/zero")
def test_a_device_is_never_read() -> None:
    with pytest.raises(RecordReadError, match="not a regular file"):
        within(10, lambda: records(Path("/dev/zero"), "jsonl"))  # would never end


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    target = write(tmp_path, "blob", b"1\n2\n")
    (tmp_path / "d.jsonl").symlink_to(target)
    assert len(records(tmp_path / "d.jsonl")) == 2


def test_the_file_is_closed_when_the_iterator_is(tmp_path: Path) -> None:
    path = write(tmp_path, "d.jsonl", b"1\n2\n")
    it = iter_records(path)
    next(it)
    fds = len(os.listdir("/proc/self/fd")) if sys.platform == "linux" else 0
    it.close()  # type: ignore[attr-defined]
    if sys.platform == "linux":
        assert len(os.listdir("/proc/self/fd")) == fds - 1


# --- the property: as many records as count_file counts -------------------------

_WS_LINE = st.sampled_from(["", " ", "\t", " \r", "\x0b", "\x0c \t"])
_END = st.sampled_from(["\n", "\r\n"])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3)
    ),
    max_leaves=8,
)
_TEXT_LINE = st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=12)


@st.composite
def line_file(draw: st.DrawFn, fmt: str) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            lines.append(draw(_WS_LINE))
        elif fmt == "jsonl":
            pad = draw(st.sampled_from(["", " ", "\t"]))
            lines.append(pad + json.dumps(draw(_JSON), ensure_ascii=draw(st.booleans())) + pad)
        else:
            lines.append(draw(_TEXT_LINE))
    ends = [draw(_END) for _ in lines]
    unended = draw(st.booleans())
    if lines and unended:
        ends[-1] = ""  # no final newline
    return "".join(a + b for a, b in zip(lines, ends, strict=True)).encode("utf-8")


_CELL = st.text(st.sampled_from(list('ab ,\t"\r\n\xe9')), max_size=6)


@st.composite
def delimited_file(draw: st.DrawFn, delimiter: str) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator=draw(_END))
    writer.writerow(["h1", "h2", "h3"])
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.integers(0, 4)) == 0:
            out.write(draw(st.sampled_from(["\n", "\r\n", "\r"])))  # an empty row
        else:
            writer.writerow(draw(st.lists(_CELL, max_size=4)))
    text = out.getvalue()
    if draw(st.booleans()):  # raw bytes too: stray quotes, lone \r, a quote left open
        text += draw(st.text(st.sampled_from(list('a,\t"\r\n ')), max_size=20))
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # no final line end
    return text.encode("utf-8")


_FILES = st.one_of(
    st.tuples(st.just("jsonl"), line_file("jsonl")),
    st.tuples(st.sampled_from(["text", "txt"]), line_file("text")),
    st.tuples(st.just("csv"), delimited_file(",")),
    st.tuples(st.just("tsv"), delimited_file("\t")),
    st.tuples(st.just("json"), st.lists(_JSON, max_size=5).map(json.dumps).map(str.encode)),
    st.tuples(st.just("json"), _JSON.map(json.dumps).map(str.encode)),
)


@settings(max_examples=500, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_FILES)
def test_iter_records_yields_what_count_file_counts(
    tmp_path: Path, case: tuple[str, bytes]
) -> None:
    fmt, data = case
    path = write(tmp_path, f"data.{fmt}", data)
    got = records(path, fmt)
    assert len(got) == count_file(path, fmt)
    assert [r.number for r in got] == list(range(1, len(got) + 1))
    lines = [r.line for r in got]
    assert lines == sorted(lines) and all(line >= 1 for line in lines)
    if fmt in ("jsonl", "text", "txt"):  # each record is on its own physical line
        assert len(set(lines)) == len(lines) and lines[-1:] <= [data.count(b"\n") + 1]
