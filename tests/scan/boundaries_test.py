"""Matches across chunk cuts, parallel ranges and streamed pickle constants."""

from __future__ import annotations

import pickle
import random
from functools import partial
from pathlib import Path

import pytest

from ftmanifest.scan import engine as eng
from ftmanifest.scan.artifacts.binary import scan_binary
from ftmanifest.scan.artifacts.pickle_ops import CHUNK as PICKLE_CHUNK
from ftmanifest.scan.artifacts.sniff import detect_format
from ftmanifest.scan.engine import ScanOptions, scan_paths
from ftmanifest.scan.text import readers
from ftmanifest.scan.text.text import scan_buffer, scan_text

GHP = "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "WbnxXcOdNX8Z5hs1UcAKKjdlT0NbJEjelMSA9lpER2YaXWwAPXPnVFmBLNIjvj0x\n"
)


def _corpus(seed: int) -> bytes:
    r = random.Random(seed)
    out = []
    for i in range(900):
        pick = r.random()
        if pick < 0.04:
            out.append(PEM + "-----END RSA PRIVATE KEY-----\n")
        elif pick < 0.07:
            out.append(f"db_password =\n  oPeKKO1O4IU{i:04d}AAoBE\n")  # value on the next line
        elif pick < 0.10:
            out.append(f"note {'z' * r.randrange(3000, 9000)} {GHP} tail\n")  # long line
        else:
            out.append(f"line {i} mail u{i}@uni-lisboa.pt {'filler ' * r.randrange(1, 30)}\n")
    return "".join(out).encode()


def _key(findings) -> list[tuple]:
    return [(f.rule, f.line, f.column, f.fingerprint, f.extra["span"]) for f in findings]


@pytest.mark.parametrize("seed", [1, 2])
def test_small_chunks_and_ranges_find_what_one_buffer_finds(tmp_path, monkeypatch, seed) -> None:
    data = _corpus(seed)
    p = tmp_path / "d.txt"
    p.write_bytes(data)
    whole = _key(scan_buffer(data, path=str(p)))
    assert {r for r, *_ in whole} >= {"secret.private-key", "secret.generic-assignment"}
    monkeypatch.setattr(readers, "CHUNK", 4096)
    monkeypatch.setattr(readers, "OVERLAP", 1024)
    assert _key(scan_paths([p], ScanOptions(jobs=1)).findings) == whole
    monkeypatch.setattr(eng, "RANGE", 7000)
    monkeypatch.setattr(eng, "RANGE_MIN", 1)
    monkeypatch.setattr(eng, "POOL_MIN", 0)
    assert _key(scan_paths([p], ScanOptions(jobs=2)).findings) == whole


def test_pem_split_exactly_at_a_range_boundary(tmp_path, monkeypatch) -> None:
    head = b"x" * 5000 + b"\n"
    p = tmp_path / "k.txt"
    p.write_bytes(head + PEM.encode() + b"y\n" * 3000)
    monkeypatch.setattr(eng, "RANGE", len(head) + 20)  # the cut falls after the BEGIN line
    monkeypatch.setattr(eng, "RANGE_MIN", len(head) + 20)
    monkeypatch.setattr(eng, "POOL_MIN", 0)
    found = scan_paths([p], ScanOptions(jobs=2)).findings
    assert [(f.rule, f.line, f.column) for f in found] == [("secret.private-key", 2, 1)]


def test_huge_line_cut_inside_a_token(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(readers, "CHUNK", 4096)
    monkeypatch.setattr(readers, "OVERLAP", 1024)
    for at in (4096 - 20, 4096 - 1, 4096 + 3, 2 * 4096 - 1000 - 7):
        p = tmp_path / f"h{at}.txt"
        p.write_text("a" * at + " " + GHP + " c" * 5000)
        found = scan_paths([p], ScanOptions(jobs=1)).findings
        assert [(f.rule, f.line) for f in found] == [("secret.github-pat", 1)], at


def _pickle_scan(path: Path) -> list:
    assert detect_format(path) == "pickle"
    return scan_binary(path, "pickle", partial(scan_text, secrets=True, pii=True))


@pytest.mark.parametrize("protocol", [0, 4])
def test_secret_across_a_streamed_pickle_chunk(tmp_path, protocol: int) -> None:
    for shift in (10, 20, 39):
        text = "x" * (PICKLE_CHUNK - shift) + " " + GHP + " " + "y" * 1000
        p = tmp_path / f"s{protocol}-{shift}.pkl"
        p.write_bytes(pickle.dumps({"note": text}, protocol=protocol))
        found = [f for f in _pickle_scan(p) if f.kind == "secret"]
        assert [f.rule for f in found] == ["secret.github-pat"], (protocol, shift)


def test_secret_inside_the_overlap_is_reported_once(tmp_path) -> None:
    text = "x" * (PICKLE_CHUNK - 200) + " " + GHP + " " + "y" * 5000
    p = tmp_path / "once.pkl"
    p.write_bytes(pickle.dumps([text], protocol=4))
    assert [f.rule for f in _pickle_scan(p) if f.kind == "secret"] == ["secret.github-pat"]
