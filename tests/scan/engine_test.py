from __future__ import annotations

import random

from ftmanifest.scan import engine as eng
from ftmanifest.scan.engine import ScanOptions, scan_paths
from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import needs_hyperscan

GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"


def _corpus(n: int, seed: int = 3) -> bytes:
    r = random.Random(seed)
    parts = []
    for i in range(n):
        parts.append(
            f'{{"i": {i}, "ip": "{r.randrange(256)}.{r.randrange(256)}.{r.randrange(256)}.{r.randrange(256)}",'  # noqa: E501
            f' "t": "token = {r.getrandbits(64):x}Zq{i} mail u{i}@mail{i % 7}.de +49 30 {i:04d} 5678",'  # noqa: E501
            f' "card": "4111 1111 1111 1111", "url": "https://u:p{r.getrandbits(40):x}@h{i}.io/x"}}\n'
        )
    return "".join(parts).encode()


@needs_hyperscan
def test_engines_give_identical_findings() -> None:
    buf = _corpus(400)
    a = scan_buffer(buf, path="c", engine="re")
    b = scan_buffer(buf, path="c", engine="hyperscan")
    assert a and [f.to_dict() for f in a] == [f.to_dict() for f in b]


def test_parallel_ranges_keep_line_numbers(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(eng, "RANGE", 4096)
    monkeypatch.setattr(eng, "POOL_MIN", 0)
    p = tmp_path / "d.jsonl"
    lines = [f'{{"n": {i}, "text": "filler text number {i}"}}\n' for i in range(3000)]
    for k in (7, 1500, 2999):
        lines[k] = f'{{"secret": "{GHP}"}}\n'
    p.write_text("".join(lines))
    serial = scan_paths([p], ScanOptions(jobs=1)).findings
    parallel = scan_paths([p], ScanOptions(jobs=2)).findings
    assert [f.line for f in parallel] == [8, 1501, 3000]
    assert [f.to_dict() for f in serial] == [f.to_dict() for f in parallel]


def test_directory_walk_and_missing_path(tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text(GHP)
    (tmp_path / "b.txt").write_text("clean")
    (tmp_path / "empty.txt").write_text("")
    res = scan_paths([tmp_path])
    assert len(res.files) == 3 and [f.rule for f in res.findings] == ["secret.github-pat"]
    try:
        scan_paths([tmp_path / "nope"])
    except FileNotFoundError as exc:
        assert "does not exist" in str(exc)
    else:
        raise AssertionError("missing path accepted")


def test_kinds_can_be_switched_off(tmp_path) -> None:
    p = tmp_path / "a.txt"
    p.write_text(f"{GHP} ana.silva@uni-lisboa.pt")
    assert {f.kind for f in scan_paths([p]).findings} == {"secret", "pii"}
    assert {f.kind for f in scan_paths([p], ScanOptions(pii=False)).findings} == {"secret"}
    assert {f.kind for f in scan_paths([p], ScanOptions(secrets=False)).findings} == {"pii"}


def test_many_small_files_share_pool_tasks_and_keep_their_lines(tmp_path, monkeypatch) -> None:
    """Ranges are joined into pool tasks: findings, files and line numbers as in one process."""
    monkeypatch.setattr(eng, "RANGE", 4096)
    monkeypatch.setattr(eng, "RANGE_MIN", 4096)
    monkeypatch.setattr(eng, "POOL_MIN", 0)
    for i in range(60):
        lines = [
            f'{{"n": {j}, "text": "row {j} of file {i}"}}\n' for j in range(400 if i % 7 else 3)
        ]
        if i % 5 == 0:
            lines[-1] = f'{{"secret": "{GHP}"}}\n'
        (tmp_path / f"f{i:02d}.jsonl").write_text("".join(lines))
    files = sorted(tmp_path.iterdir())
    tasks = eng._text_ranges([(p, p.stat().st_size) for p in files], 2)
    assert len(eng._batches(tasks, 2)) < len(tasks)  # joined, and more than one
    serial = scan_paths([tmp_path], ScanOptions(jobs=1)).findings
    parallel = scan_paths([tmp_path], ScanOptions(jobs=2)).findings
    assert len(parallel) == 12 and {f.line for f in parallel} == {3, 400}
    assert [f.to_dict() for f in serial] == [f.to_dict() for f in parallel]
