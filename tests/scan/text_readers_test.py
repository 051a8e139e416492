from __future__ import annotations

import csv
import gzip
import json

import pytest

from ftmanifest.scan.engine import ScanOptions, scan_paths
from ftmanifest.scan.text import readers
from ftmanifest.scan.text.text import scan_text
from tests.scan.engines import ENGINES

GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"


def test_scan_text_contract() -> None:
    (f,) = scan_text(f"hub token {GHP}", path="m.bin", line=None, extra={"offset": 17})
    assert (f.kind, f.rule, f.path, f.line, f.column) == (
        "secret",
        "secret.github-pat",
        "m.bin",
        1,
        11,
    )
    assert f.extra["offset"] == 17
    (g,) = scan_text(GHP, path="m.safetensors", line=3, extra={"metadata_key": "k"})
    assert g.line == 3 and g.column is None and g.extra["metadata_key"] == "k"


def test_jsonl_reports_record_line(tmp_path) -> None:
    p = tmp_path / "d.jsonl"
    rows = [{"text": "hello"}] * 5 + [{"text": f"my key {GHP}"}] + [{"text": "bye"}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (f,) = scan_paths([p]).findings
    assert f.line == 6 and f.extra["record"] == 6


def test_csv_and_tsv_row_column(tmp_path) -> None:
    for name, delim in (("d.csv", ","), ("d.tsv", "\t")):
        p = tmp_path / name
        with p.open("w", newline="") as fh:
            w = csv.writer(fh, delimiter=delim)
            w.writerow(["id", "note", "mail"])
            w.writerow(["1", "a, quoted, note", "ana.silva@uni-lisboa.pt"])
        (f,) = scan_paths([p]).findings
        assert (f.extra["row"], f.extra["column"]) == (2, 3), name


def test_gzip_variant(tmp_path) -> None:
    p = tmp_path / "d.jsonl.gz"
    with gzip.open(p, "wt") as fh:
        fh.write('{"a": 1}\n' * 3 + f'{{"t": "{GHP}"}}\n')
    (f,) = scan_paths([p]).findings
    assert f.line == 4 and f.extra["compressed"] == "gzip"


def test_parquet_row_and_column(tmp_path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    p = tmp_path / "d.parquet"
    table = pa.table({"n": [1, 2, 3], "text": ["a", "b", f"tok {GHP}"]})
    pq.write_table(table, p)
    (f,) = scan_paths([p]).findings
    assert f.extra["row"] == 3 and f.extra["column"] == "text"


def test_unknown_binary_is_not_scanned(tmp_path) -> None:
    p = tmp_path / "blob.dat"
    p.write_bytes(bytes(range(256)) * 4)
    (f,) = scan_paths([p]).findings
    assert f.kind == "not-scanned"


def test_over_size_cap_is_not_scanned(tmp_path) -> None:
    p = tmp_path / "big.txt"
    p.write_text("x" * 2000)
    (f,) = scan_paths([p], ScanOptions(max_bytes=1000)).findings
    assert f.kind == "not-scanned" and "size cap" in f.message


def test_ner_without_backend_says_so(tmp_path) -> None:
    p = tmp_path / "a.txt"
    p.write_text("Ada Lovelace lives at 12 Example Road")
    (f,) = scan_paths([p], ScanOptions(ner=True)).findings
    assert f.kind == "not-scanned" and "NER" in f.message


@pytest.mark.parametrize("engine", ENGINES)
def test_a_line_longer_than_a_chunk_is_bounded(tmp_path, engine: str, monkeypatch) -> None:
    # One line longer than a chunk (a long run of one letter, of spaces,
    # of a number-like pattern, then a token past the first chunk), with the chunk a
    # quarter of its size so the line costs a quarter of the time it would at 4 MiB.
    monkeypatch.setattr(readers, "CHUNK", 1 << 20)
    p = tmp_path / "one.txt"
    p.write_bytes(b"a" * 625_000 + b" " * 500_000 + b"1.2" * 50_000 + f" {GHP}".encode())
    assert p.stat().st_size > readers.CHUNK
    # No wall-clock bound here (speed lives in benchmarks/); a super-linear
    # pattern would make this test hang rather than pass.
    found = scan_paths([p], ScanOptions(engine=engine)).findings
    assert [f.rule for f in found] == ["secret.github-pat"] and found[0].line == 1


def test_not_scanned_is_an_error(tmp_path) -> None:
    p = tmp_path / "blob.dat"
    p.write_bytes(bytes(range(256)) * 4)
    (f,) = scan_paths([p]).findings
    assert (f.kind, f.severity) == ("not-scanned", "error")
