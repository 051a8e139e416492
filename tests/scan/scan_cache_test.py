from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from ftmanifest.scan import cache as sc
from ftmanifest.scan import scan_cached, scan_paths
from ftmanifest.scan.engine import ScanOptions

GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"


@pytest.fixture
def scanned(monkeypatch) -> list[str]:
    """The real scanner, counting the files it scans (small text files are read
    once by ``read_small``, the rest by ``scan_files``)."""
    calls: list[str] = []
    real = sc.scan_files

    def counting(paths, opts=None, **kw):
        paths = list(paths)
        calls.extend(str(p) for p in paths)
        return real(paths, opts, **kw)

    def counting_small(paths, opts, **kw):
        done, rest = real_small(paths, opts, **kw)
        calls.extend(str(paths[one.at]) for one in done if not one.cached)
        return done, rest

    real_small = sc.read_small
    monkeypatch.setattr(sc, "scan_files", counting)
    monkeypatch.setattr(sc, "read_small", counting_small)
    return calls


def _old(p: Path) -> Path:
    """Date a file back: the stat cache does not trust files written just now."""
    os.utime(p, ns=(p.stat().st_mtime_ns - 10**10,) * 2)
    return p


def _dicts(findings) -> list[dict]:
    return [f.to_dict() for f in findings]


def test_unchanged_file_is_not_scanned_again(tmp_path, scanned) -> None:
    a = tmp_path / "a.jsonl"
    a.write_text(f'{{"t": "hi"}}\n{{"t": "{GHP} mail ana.silva@uni-lisboa.pt"}}\n')
    b = tmp_path / "b.txt"
    b.write_text("clean")
    _old(a), _old(b)
    first = scan_cached([tmp_path])
    assert sorted(scanned) == sorted([str(a), str(b)])
    second = scan_cached([tmp_path])
    assert sorted(scanned) == sorted([str(a), str(b)])  # no new scanner call
    assert (
        _dicts(second.findings) == _dicts(first.findings) == _dicts(scan_paths([tmp_path]).findings)
    )
    assert [f.line for f in second.findings] == [2, 2] and second.findings[0].extra["record"] == 2
    assert second.files == first.files and second.bytes_scanned == first.bytes_scanned > 0


def test_findings_follow_the_current_path(tmp_path, scanned) -> None:
    a = tmp_path / "a.txt"
    a.write_text(GHP)
    scan_cached([a])
    b = tmp_path / "copy.txt"
    b.write_bytes(a.read_bytes())
    res = scan_cached([b])
    assert scanned == [str(a)]  # same digest: served from the cache
    assert [f.path for f in res.findings] == [str(b)]


def test_one_byte_change_is_rescanned(tmp_path, scanned) -> None:
    a = tmp_path / "a.txt"
    a.write_text("token: " + GHP)
    _old(a)
    assert len(scan_cached([a]).findings) == 1
    a.write_text("token: " + GHP[:-1] + "x")  # same size, one byte differs
    res = scan_cached([a])
    assert scanned == [str(a), str(a)]
    assert _dicts(res.findings) == _dicts(scan_paths([a]).findings)


def test_options_and_suffix_are_part_of_the_key(tmp_path, scanned) -> None:
    a = tmp_path / "a.txt"
    a.write_text(f"{GHP} ana.silva@uni-lisboa.pt")
    assert len(scan_cached([a]).findings) == 2
    assert [f.kind for f in scan_cached([a], ScanOptions(pii=False)).findings] == ["secret"]
    j = tmp_path / "a.jsonl"
    j.write_bytes(a.read_bytes())
    assert scan_cached([j]).findings[0].extra.get("record") == 1  # JSONL annotation
    assert len(scanned) == 3
    scan_cached([a], ScanOptions(jobs=1, engine="re"))  # neither changes findings
    assert len(scanned) == 3


def test_no_cache_neither_reads_nor_writes(tmp_path, scanned, _private_cache_dir) -> None:
    a = tmp_path / "a.txt"
    a.write_text(GHP)
    scan_cached([a], use_cache=False)
    scan_cached([a], use_cache=False)
    assert len(scanned) == 2
    assert not (_private_cache_dir / sc.DB_NAME).exists()


def test_corrupt_cache_degrades_to_no_cache(tmp_path, scanned, _private_cache_dir, caplog) -> None:
    db = _private_cache_dir / sc.DB_NAME
    db.write_bytes(b"this is not a database" * 100)
    a = tmp_path / "a.txt"
    a.write_text(GHP)
    res = scan_cached([a])
    assert [f.rule for f in res.findings] == ["secret.github-pat"]
    assert "scan cache" in caplog.text and "unusable" in caplog.text
    scan_cached([a])
    assert len(scanned) == 2  # every run scans again, none fails


def test_cache_file_is_private_and_survives_a_dropped_table(
    tmp_path, scanned, _private_cache_dir
) -> None:
    a = tmp_path / "a.txt"
    a.write_text(GHP)
    scan_cached([a])
    db = _private_cache_dir / sc.DB_NAME
    assert db.stat().st_mode & 0o077 == 0
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE results")
    assert len(scan_cached([a]).findings) == 1  # table recreated, file scanned again
    assert len(scanned) == 2


def test_scanner_version_tracks_the_source() -> None:
    v = sc.scanner_version()
    assert v.startswith("sha256:") and len(v) == 71 and v == sc.scanner_version()


def test_damaged_row_is_rescanned_and_replaced(tmp_path, scanned, _private_cache_dir) -> None:
    a = tmp_path / "a.txt"
    a.write_text(GHP)
    scan_cached([a])
    with sqlite3.connect(_private_cache_dir / sc.DB_NAME) as conn:
        conn.execute('UPDATE results SET findings = \'[{"kind": 1, "bogus": 2}]\'')
    assert [f.rule for f in scan_cached([a]).findings] == ["secret.github-pat"]
    assert [f.rule for f in scan_cached([a]).findings] == ["secret.github-pat"]
    assert len(scanned) == 2  # rescanned once, then served from the repaired row


def test_cli_no_cache_flag(tmp_path, capsys, scanned, _private_cache_dir) -> None:
    import argparse

    from ftmanifest.cli import scan as cli

    a = tmp_path / "a.txt"
    a.write_text(GHP)
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())

    def run(*argv: str) -> int:
        args = parser.parse_args(["scan", *argv, str(a)])
        return args.func(args)

    assert run("--no-cache") == 1 and not (_private_cache_dir / sc.DB_NAME).exists()
    assert run() == 1 and run() == 1
    assert len(scanned) == 2 and (_private_cache_dir / sc.DB_NAME).exists()
    assert "secret.github-pat" in capsys.readouterr().out


def test_rows_of_another_scanner_version_are_dropped_not_kept_forever(
    tmp_path, scanned, _private_cache_dir, monkeypatch
) -> None:
    """A row's context holds the scanner version, so after an upgrade (or an edited
    rule) the old rows are never read again: they are dropped when the cache opens."""
    a = tmp_path / "a.txt"
    a.write_text(GHP)
    _old(a)
    db = _private_cache_dir / sc.DB_NAME

    def rows() -> int:  # the file's rows (the names of the walk have one of their own)
        with sqlite3.connect(db) as conn:
            ask = "SELECT count(*) FROM results WHERE digest NOT LIKE 'names:%'"
            return conn.execute(ask).fetchone()[0]

    scan_cached([a])
    scan_cached([a])
    assert rows() == 1 and len(scanned) == 1  # same version: kept and served
    monkeypatch.setattr(sc, "scanner_version", lambda: "sha256:" + "0" * 64)
    assert [f.rule for f in scan_cached([a]).findings] == ["secret.github-pat"]
    assert rows() == 1 and len(scanned) == 2  # the old row gone, the new one stored
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta").fetchall() == [("sha256:" + "0" * 64,)]
