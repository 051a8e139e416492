"""``recordio.line_blocks`` against ``physical_lines``: the same lines, numbers and
refusals, whatever the block size (the leakage check reads its lines in blocks)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from ftmanifest.recordio import Limits, RecordTooLargeError, line_blocks, physical_lines

PATH = Path("train.jsonl")


def _lines(data: bytes, limits: Limits) -> tuple[list[tuple[int, bytes]], tuple[str, int] | None]:
    out: list[tuple[int, bytes]] = []
    try:
        for line, raw in physical_lines(io.BytesIO(data), PATH, limits):
            out.append((line, raw))
    except RecordTooLargeError as exc:
        return out, (str(exc), exc.line or 0)
    return out, None


def _blocks(
    data: bytes, limits: Limits, size: int
) -> tuple[list[tuple[int, bytes]], tuple[str, int] | None]:
    out: list[tuple[int, bytes]] = []
    try:
        for first, block in line_blocks(io.BytesIO(data), PATH, limits, size):
            assert block, "an empty block"
            out += enumerate(block, first)
    except RecordTooLargeError as exc:
        return out, (str(exc), exc.line or 0)
    return out, None


def _random_file(rng: random.Random) -> bytes:
    pieces = []
    for _ in range(rng.randint(0, 12)):
        pieces.append(bytes(rng.choice(b"ab \r{}") for _ in range(rng.randint(0, 14))))
        pieces.append(rng.choice([b"\n", b"\n", b"\r\n", b""]))
    return b"".join(pieces)


@pytest.mark.parametrize("seed", range(40))
def test_blocks_read_what_physical_lines_reads(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        data = _random_file(rng)
        limits = Limits(
            record_bytes=rng.randint(1, 16),
            total_bytes=rng.choice([None, rng.randint(0, 120)]),
        )
        expected = _lines(data, limits)
        for size in (1, 2, 3, 7, 64, 1 << 20):
            assert _blocks(data, limits, size) == expected, (data, limits, size)


def test_a_line_over_the_bound_is_refused_at_its_number() -> None:
    data = b'{"a": 1}\n' * 3 + b"x" * 40 + b"\n" + b"{}\n"
    lines, error = _blocks(data, Limits(record_bytes=16), 8)
    assert [n for n, _raw in lines] == [1, 2, 3]
    assert error is not None and error[1] == 4 and "16-byte record limit" in error[0]


def test_lines_within_the_bounds_all_come_back() -> None:  # the control
    data = b'{"a": 1}\n' * 5 + b"last"
    lines, error = _blocks(data, Limits(record_bytes=9, total_bytes=len(data)), 4)
    assert error is None
    assert lines == [(n, b'{"a": 1}\n') for n in range(1, 6)] + [(6, b"last")]


def test_a_long_line_counts_only_what_the_reader_takes_of_it() -> None:
    # physical_lines reads record_bytes + 1 bytes of a long line, then refuses it for
    # its length, before the file as a whole is over its bound
    data = b"{}\n" + b"y" * 50 + b"\n"
    limits = Limits(record_bytes=10, total_bytes=20)
    expected = _lines(data, limits)
    assert expected[1] is not None and "record limit" in expected[1][0]
    for size in (4, 1 << 20):
        assert _blocks(data, limits, size) == expected


def _chunks_line_by_line(path: Path, limit_bytes: int, limit_lines: int) -> list[tuple[int, int]]:
    """(first line, lines) of each chunk as cut one line at a time: a chunk ends before
    the line that finds it ``limit_bytes`` long or ``limit_lines`` lines long."""
    out: list[tuple[int, int]] = []
    first, size, count = 1, 0, 0
    with open(path, "rb") as f:
        for line, raw in physical_lines(f, path, Limits()):
            if size >= limit_bytes or count >= limit_lines:
                out.append((first, count))
                first, size, count = line, 0, 0
            size += len(raw)
            count += 1
    if count:
        out.append((first, count))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_chunks_are_cut_where_a_line_by_line_reader_cuts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    from ftmanifest.data import chunks

    rng = random.Random(seed)
    path = tmp_path / "train.jsonl"
    lines = [b"{}" + b"x" * rng.choice([0, 1, 5, 40, 300]) + b"\n" for _ in range(400)]
    path.write_bytes(b"".join(lines))
    limit_bytes, limit_lines = rng.choice([1, 50, 700, 5000]), rng.choice([1, 3, 16, 1000])
    monkeypatch.setattr(chunks, "CHUNK_BYTES", limit_bytes)
    monkeypatch.setattr(chunks, "CHUNK_RECORDS", limit_lines)
    monkeypatch.setattr(chunks, "BLOCK_BYTES", rng.choice([7, 333, 1 << 20]))
    got = [(c.first, len(c.raws)) for c in chunks._line_chunks(path, "jsonl", ())]
    assert got == _chunks_line_by_line(path, limit_bytes, limit_lines)
    assert b"".join(r for c in chunks._line_chunks(path, "jsonl", ()) for r in c.raws) == (
        path.read_bytes()
    )
