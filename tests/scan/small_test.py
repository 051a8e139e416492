"""Small files read once (``scan.small``): the same findings as the range scanner,
in workers or not; what changed, is not text or is not a file is left to the usual
path, which names it."""

from __future__ import annotations

import os
import pickle
import threading
from pathlib import Path

import pytest

from ftmanifest.scan import cache as sc
from ftmanifest.scan import small
from ftmanifest.scan.engine import ScanOptions, scan_files
from ftmanifest.scan.text.readers import scan_text_range

GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"
SAMPLES = {
    "a.jsonl": f'{{"t": "hi"}}\n{{"t": "{GHP} mail ana.silva@uni-lisboa.pt"}}\n'.encode(),
    "b.csv": f"id,text\n1,call +44 20 7946 0958\n2,{GHP}\n".encode(),
    "c.txt": "token:\n  " + GHP + "\n",
    "d.json": ('{"k": "' + GHP[:10] + "\\u0022" + GHP[10:] + '"}').encode(),
    "e.txt": "\ufeffplain ".encode("utf-16") + GHP.encode("utf-16-le"),
    "f.txt": b"ascii first\n" * 1000 + b"\x00 stray NUL then " + GHP.encode(),
    "g.txt": b"",
}


def _write(folder: Path) -> list[Path]:
    folder.mkdir(exist_ok=True)
    out = []
    for name, data in SAMPLES.items():
        p = folder / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        out.append(p)
    return out


def _rows(findings) -> list[dict]:
    return [f.to_dict() for f in findings]


def test_one_read_gives_the_range_scanners_findings(tmp_path: Path) -> None:
    files = _write(tmp_path)
    done, rest = small.read_small(files, ScanOptions(), jobs=1)
    assert rest == [] and [one.at for one in done] == list(range(len(files)))
    for one in done:
        p = files[one.at]
        size = p.stat().st_size
        want = scan_text_range(p, 0, size, secrets=True, pii=True)[0] if size else []
        assert _rows(one.findings) == _rows(want), p.name
        assert one.size == size
    assert any(one.findings for one in done)  # the samples do hold findings


def test_forked_workers_and_one_process_agree(tmp_path: Path, monkeypatch) -> None:
    files = []
    for i in range(12):
        files += _write(tmp_path / f"d{i}")
    inline = scan_files(files, ScanOptions(jobs=1))
    monkeypatch.setattr(small, "FORK_MIN", 8)
    monkeypatch.setattr(small, "PIECE", 5)
    forks: list[bool] = []
    real = small._forks
    monkeypatch.setattr(small, "_forks", lambda *a: forks.append(real(*a)) or forks[-1])
    forked = scan_files(files, ScanOptions(jobs=2))
    assert _rows(forked.findings) == _rows(inline.findings) and inline.findings
    assert forked.bytes_scanned == inline.bytes_scanned and forked.files == inline.files
    assert forks == [True]  # read by forked workers


def test_what_is_not_text_is_judged_by_the_usual_path(tmp_path: Path) -> None:
    """A pickle named .txt, and a file over the one-read size, are not judged here."""
    evil = tmp_path / "notes.txt"
    evil.write_bytes(pickle.dumps(os.system, protocol=0))
    big = tmp_path / "big.txt"
    big.write_bytes(b"line\n" * (small.SMALL // 5 + 10) + GHP.encode() + b"\n")
    done, rest = small.read_small([evil, big], ScanOptions(), jobs=1)
    assert done == [] and rest == [0, 1]
    rules = {f.rule for f in scan_files([evil, big]).findings}
    assert "pickle.unsafe-import" in rules and "secret.github-pat" in rules


def test_a_fifo_swapped_in_after_the_walk_is_a_row_not_a_hang(tmp_path: Path) -> None:
    p = tmp_path / "a.txt"
    p.write_text("fine")
    listed = [p]
    p.unlink()
    os.mkfifo(p)
    got: dict[str, object] = {}
    t = threading.Thread(target=lambda: got.update(r=scan_files(listed)), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "the scan blocked on a FIFO"
    (row,) = got["r"].findings  # type: ignore[union-attr]
    assert row.kind == "not-scanned" and "not a regular file" in row.message


def test_a_file_that_changes_while_it_is_read_is_left_to_the_usual_path(
    tmp_path: Path, monkeypatch
) -> None:
    p = tmp_path / "a.txt"
    p.write_text("harmless line\n")
    real = os.pread

    def pread(fd: int, n: int, offset: int) -> bytes:
        data = real(fd, n, offset)
        with open(p, "a") as fh:  # written while it is read: the stat moves on
            fh.write(GHP + "\n")
        return data

    monkeypatch.setattr(small.os, "pread", pread)
    done, rest = small.read_small([p], ScanOptions(), jobs=1)
    assert done == [] and rest == [0]
    monkeypatch.setattr(small.os, "pread", real)
    assert "secret.github-pat" in {f.rule for f in scan_files([p]).findings}


def test_the_cache_keeps_digest_findings_and_stat_of_the_same_read(
    tmp_path: Path, monkeypatch
) -> None:
    """What the cache stores for a small file is what one read held: a change after
    that read is a new digest, scanned again, never the old answer."""
    p = tmp_path / "a.txt"
    p.write_text("harmless line\n")
    os.utime(p, ns=(p.stat().st_mtime_ns - 10**10,) * 2)
    assert sc.scan_cached([p]).findings == []
    p.write_text(GHP + "\n")  # same path, new bytes, new stat
    assert [f.rule for f in sc.scan_cached([p]).findings] == ["secret.github-pat"]
    assert [f.rule for f in sc.scan_cached([p]).findings] == ["secret.github-pat"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything")
def test_an_unreadable_small_file_is_named_by_the_usual_path(tmp_path: Path) -> None:
    p = tmp_path / "a.txt"
    p.write_text(GHP)
    p.chmod(0)
    done, rest = small.read_small([p], ScanOptions(), jobs=1)
    assert done == [] and rest == [0]
    (row,) = scan_files([p]).findings
    assert row.kind == "not-scanned" and "unreadable" in row.message


def test_findings_cross_to_workers_and_back_whatever_their_extra() -> None:
    """A finding's default ``extra`` is a read-only proxy, which pickle refuses."""
    import pickle

    from ftmanifest.findings import Finding
    from ftmanifest.scan.unscanned import not_scanned

    for f in (
        not_scanned("a.txt", "why"),
        not_scanned("a.txt", "why")._replace(extra={"format": "7z"}),
        Finding("k", "r", "m", line=3, loc=("data", 0, "digest")),
    ):
        back = pickle.loads(pickle.dumps(f))
        assert back == f and type(back.extra) is type(f.extra)


def test_a_stray_nul_in_a_large_text_file_is_a_row_from_the_pool(tmp_path: Path) -> None:
    """A range scanned by a pool worker that finds a stray NUL used to end the scan
    with an internal error (the row's ``extra`` could not be sent back)."""
    p = tmp_path / "big.txt"
    with open(p, "wb") as fh:
        fh.write(b"ascii line\n" * 800_000 + b"\x00 stray\n" + GHP.encode() + b"\n")
    result = scan_files([p], ScanOptions(jobs=2))
    rules = sorted(f.rule for f in result.findings)
    assert rules == ["scan.not-scanned", "secret.github-pat"], rules
