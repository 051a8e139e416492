"""Nothing a rank sends is unpickled: hostile and malformed answers, on threads.

Each step that gathers (hashing, scanning, exit codes, record signatures, the
verdict) meets a peer that sends a crafted pickle whose unpickling would
create a marker file, or JSON / bytes of the wrong shape: rank 0 refuses
naming rank 1 (exit 1), the marker never appears, nothing crashes or hangs.
The codecs round-trip what honest ranks send.  A last test reads the package
for the pickle-based collectives.
"""

from __future__ import annotations

import json
import os
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ftmanifest import wire
from ftmanifest.counts import RecordCountError
from ftmanifest.data import parallel, ranks, sigpack
from ftmanifest.distributed import shard
from ftmanifest.distributed.scan import scan_distributed
from ftmanifest.errors import EXIT_REFUSED, FtManifestError, InputNotFoundError, UsageError
from ftmanifest.findings import Finding
from ftmanifest.hashing.digests import FileDigest, UnreadableFileError
from ftmanifest.recordio import RecordReadError
from ftmanifest.wire import Malformed, RankAnswerError
from tests.distributed.threads import ThreadComm, on_ranks


class _Boom:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (str(self.marker),))


def crafted(marker: Path) -> bytes:
    """Pickle bytes that create ``marker`` when unpickled; checked to do so."""
    payload = pickle.dumps(_Boom(marker))
    probe = marker.with_name(marker.name + "-probe")
    pickle.loads(pickle.dumps(_Boom(probe)))  # a naive receiver would run this
    assert probe.is_dir()
    return payload


def _refused_by_name(result: Any, rank: int = 1) -> None:
    assert isinstance(result, RankAnswerError), result
    assert result.exit_code == EXIT_REFUSED and result.reason == "rank-answer"
    assert f"rank {rank} sent an answer" in result.message, result.message


def _files(tmp_path: Path) -> list[Path]:
    out = []
    for i in range(3):
        out.append(tmp_path / f"f{i}.txt")
        out[-1].write_text(f"file {i}\n" * (i + 1), "utf-8")
    return out


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "rows.jsonl"
    rows = [{"text": f"record number {i} says " + "word " * (i % 9)} for i in range(200)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def _sign(path: Path) -> Callable[[ThreadComm], Any]:
    def run(comm: ThreadComm) -> Any:
        with parallel.Workers(1) as workers:
            return list(ranks.RankSigner(comm, workers).signatures(path, None))

    return run


STEPS: dict[str, Callable[[Path], Callable[[ThreadComm], Any]]] = {
    "exit codes": lambda tmp: lambda c: shard.agree_exit(c, 0),
    "file stats": lambda tmp: lambda c: shard.hash_files(c, _files(tmp), use_cache=False),
    "files to scan": lambda tmp: lambda c: scan_distributed(c, [tmp], use_cache=False),
    "record signatures": lambda tmp: _sign(_data(tmp)),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_a_crafted_pickle_from_a_peer_runs_nothing_and_is_refused(
    tmp_path: Path, step: str
) -> None:
    marker = tmp_path / "pwned"
    payload = crafted(marker)
    (tmp_path / "work").mkdir()
    results = on_ranks(
        [STEPS[step](tmp_path / "work"), lambda c: c.all_gather_bytes(payload, "anything")]
    )
    _refused_by_name(results[0])
    assert step in results[0].message
    assert not marker.exists()


def _second_gather(first: Any, second: Any) -> Callable[[ThreadComm], Any]:
    """A peer that answers the first gather as asked, then sends ``second``."""

    def run(comm: ThreadComm) -> Any:
        comm.all_gather_json(first, "step 1")
        if isinstance(second, bytes):
            return comm.all_gather_bytes(second, "step 2")
        return comm.all_gather_json(second, "step 2")

    return run


CALL = [shard._TAG, False, False, False]  # hash_files(..., use_cache=False), no count


@pytest.mark.parametrize(
    "digests",
    [
        b"\x80\x04crafted",  # not JSON
        b"[" * 100_000 + b"]" * 100_000,  # JSON too deep to parse
        {"not": "a list"},
        [["sha256:00", 1, None]],  # a digest for a file it was not given
        [["sha256:00"]],
    ],
)
def test_digests_that_do_not_fit_are_refused_by_name(tmp_path: Path, digests: Any) -> None:
    peer = _second_gather({"call": CALL, "keys": []}, digests)
    results = on_ranks([lambda c: shard.hash_files(c, _files(tmp_path), use_cache=False), peer])
    _refused_by_name(results[0])


@pytest.mark.parametrize(
    "keys",
    [
        [["0/h", 1, 2, "big", 4, 5, "/x", None]],  # a size that is not a number
        [["0/h", 1, 2, -1, 4, 5, "/x", None]],  # a negative size
        [["0/h", 1, 2, 3, 4, 5, "/x"]],  # a field short
        [["0/h", True, 2, 3, 4, 5, "/x", None]],  # a bool for a number
        [[None, 1, 2, 3, 4, 5, "/x", None]],
        [["0/h", 1, 2, 3, 4, 5, "/x", 7]],  # a format that is not text
        "keys",
    ],
)
def test_file_keys_that_do_not_fit_are_refused_by_name(tmp_path: Path, keys: Any) -> None:
    results = on_ranks(
        [
            lambda c: shard.hash_files(c, _files(tmp_path), use_cache=False),
            lambda c: c.all_gather_json({"call": CALL, "keys": keys}, "file stats"),
        ]
    )
    _refused_by_name(results[0])
    assert "file stats" in results[0].message


@pytest.mark.parametrize("code", [-1, 256, True, "1", None, 1.5, [1]])
def test_an_exit_code_that_is_not_one_is_refused_by_name(code: Any) -> None:
    results = on_ranks([lambda c: shard.agree_exit(c, 0), lambda c: shard.agree_exit(c, code)])
    _refused_by_name(results[0])
    _refused_by_name(results[1])  # every rank reads the same answers: no rank waits


def test_the_size_cap_holds_before_any_payload_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    from ftmanifest.distributed import comm as comm_module

    monkeypatch.setattr(comm_module, "MAX_ANSWER", 1000)
    results = on_ranks(
        [
            lambda c: c.all_gather_json({"small": 1}, "things"),
            lambda c: c.all_gather_bytes(b"x" * 1001, "things"),
        ]
    )
    for r in results:
        assert isinstance(r, RankAnswerError), r
        assert r.message == "rank 1 sent an answer of 1001 bytes while gathering things"


def test_a_bad_finding_from_a_peer_is_refused_by_name(tmp_path: Path) -> None:
    """Rank 1 lists no file, then sends a finding whose line is text."""
    bad = wire.finding_to_wire(Finding("secret", "x", "m", path="/p")) | {"line": "7"}
    peer = _second_gather([], {"done": [], "stray": [bad]})
    (tmp_path / "a.txt").write_text("hello\n", "utf-8")
    results = on_ranks([lambda c: scan_distributed(c, [tmp_path], use_cache=False), peer])
    _refused_by_name(results[0])
    assert "scan findings" in results[0].message


# --- the codecs ---------------------------------------------------------------------


def test_errors_cross_as_allow_listed_classes_only() -> None:
    fd = FileDigest("sha256:" + "ab" * 32, 10, None)
    count = RecordCountError("bad line", path="/d.jsonl", line=3, observed="x", hint="h")
    count.digest = fd
    for exc in (
        count,
        InputNotFoundError("gone", path="/x"),
        UnreadableFileError("fifo", path="/p", expected="a file"),
        RecordReadError("cannot read", path="/r", line=9, column=2),
        UsageError("use"),
    ):
        back = wire.error_from_wire(json.loads(json.dumps(wire.error_to_wire(exc))))
        assert type(back) is type(exc)
        assert back.to_dict() == exc.to_dict()
        assert getattr(back, "digest", None) == getattr(exc, "digest", None)
    for name in (
        "Exception",
        "SystemExit",
        "os.system",
        "ManifestInvalidError",
        "KeyboardInterrupt",
    ):
        back = wire.error_from_wire({"error": name, "message": "boom", "path": "/p"})
        assert type(back) is FtManifestError and back.message == "boom"
    assert wire.error_to_wire(KeyError("k"))["message"] == "KeyError: 'k'"


@pytest.mark.parametrize(
    "value",
    [
        None,
        [],
        {"error": 1, "message": "m"},
        {"error": "InputError"},
        {"error": "InputError", "message": "m", "line": "3"},
        {"error": "InputError", "message": "m", "hint": ["h"]},
        {"error": "InputError", "message": "m", "digest": ["sha256:00", 1, None]},
        {"error": "RecordCountError", "message": "m", "digest": ["md5", 1, None]},
        {"error": "RecordCountError", "message": "m", "digest": ["sha256:00", -1, None]},
    ],
)
def test_a_malformed_error_is_malformed(value: Any) -> None:
    with pytest.raises(Malformed):
        wire.error_from_wire(value)


def test_findings_round_trip_and_bad_fields_are_malformed() -> None:
    f = Finding.at(("data", 0, "digest"), kind="drift", rule="FTM1", message="m", path="/p",
                   line=3, extra={"span": [1, 2], "record": 4})  # fmt: skip
    sent = json.dumps(wire.finding_to_wire(f), sort_keys=True)  # as all_gather_json sends it
    back = wire.finding_from_wire(json.loads(sent))
    assert back == f and list(back.extra) == ["span", "record"]  # the order output shows
    good = wire.finding_to_wire(f)
    for change in (
        {"severity": "fatal"},
        {"loc": [1.5]},
        {"extra": "[]"},
        {"extra": {}},
        {"kind": None},
    ):
        with pytest.raises(Malformed):
            wire.finding_from_wire(good | change)
    with pytest.raises(Malformed):
        wire.finding_from_wire({k: v for k, v in good.items() if k != "hint"})


# --- record signatures in bytes -------------------------------------------------------


def _signed(tmp_path: Path) -> list[tuple[int, int, bytes | None, Any]]:
    path = _data(tmp_path)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"text": ""}) + "\n")  # a record without text
    with parallel.Workers(1) as workers:
        return list(workers.signatures(path, None))


def test_signatures_round_trip_through_the_fixed_layout(tmp_path: Path) -> None:
    sigs = _signed(tmp_path)
    assert any(h is None for _n, _l, h, _m in sigs)
    raw = sigpack.pack_round([(4, sigs[:50]), (6, sigs[50:])], ended=True)
    kind, chunks, ended = sigpack.unpack(raw, full=True)
    assert (kind, ended, [i for i, _s in chunks]) == ("round", True, [4, 6])
    back = [s for _i, part in chunks for s in part]
    assert [s[:3] for s in back] == [s[:3] for s in sigs]
    for (_n, _l, h, m), (_n2, _l2, _h2, m2) in zip(sigs, back, strict=True):
        assert (m is None and m2 is None) or (h is not None and m.digest() == m2.digest())
    assert sigpack.unpack(raw, full=False) == ("round", None, True)


def test_payloads_that_do_not_fit_are_malformed(tmp_path: Path) -> None:
    raw = sigpack.pack_round([(0, _signed(tmp_path)[:3])], ended=False)
    head = len(sigpack.MAGIC) + 1
    record = sigpack._dtypes()[1].itemsize
    text_at = len(raw) - 3 * record + 16  # the first record's text flag
    bad = {
        "short": raw[:5],
        "magic": b"GARBAGE" + raw[7:],
        "kind": raw[:7] + b"\x09" + raw[8:],
        "truncated": raw[:-1],
        "longer": raw + b"\0",
        "ended": raw[:head] + b"\x02" + raw[head + 1 :],
        "count": raw[: head + 1] + (2**32 - 1).to_bytes(4, "little") + raw[head + 5 :],
        "text flag": raw[:text_at] + b"\x07" + raw[text_at + 1 :],
        "twice": sigpack.pack_round([(0, []), (0, [])], ended=False),
        "error json": sigpack.MAGIC + bytes([sigpack.ERROR]) + b"{",
        "final code": sigpack.MAGIC + bytes([sigpack.FINAL]) + b'{"code": 300, "error": null}',
        "final shape": sigpack.MAGIC + bytes([sigpack.FINAL]) + b"[]",
    }
    for name, payload in bad.items():
        with pytest.raises(Malformed):
            sigpack.unpack(payload, full=True)
            pytest.fail(name)


@pytest.mark.parametrize(
    ("chunks", "observed"),
    [
        ([(0, [])], "chunks [0]"),  # rank 0's chunk
        ([(1, []), (3, []), (5, []), (7, [])], "chunks [1, 3, 5, 7]"),  # one past the round
        ([(1, []), (5, [])], "chunks [1, 5]"),  # one left out: its records would be lost
    ],
)
def test_chunks_that_are_not_the_ranks_own_are_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[Any], observed: str
) -> None:
    """Rank 1 sends a well-formed round, but not of its chunks 1, 3 and 5 of round one."""
    monkeypatch.setattr("ftmanifest.data.chunks.CHUNK_RECORDS", 16)  # 200 records: 13 chunks
    path = _data(tmp_path)
    forged = sigpack.pack_round(chunks, ended=True)
    results = on_ranks([_sign(path), lambda c: c.all_gather_bytes(forged, "signatures")])
    _refused_by_name(results[0])
    assert results[0].observed == f"rank 1: {observed}"


def test_two_thread_ranks_sign_exactly_what_one_process_signs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ftmanifest.data.chunks.CHUNK_RECORDS", 16)  # 13 chunks, 3 rounds
    path = _data(tmp_path)
    with parallel.Workers(1) as workers:
        alone = list(workers.signatures(path, None))
    results = on_ranks([_sign(path), _sign(path)])
    assert results[1] == []
    assert [s[:3] for s in results[0]] == [s[:3] for s in alone]
    assert [s[3].digest() for s in results[0]] == [s[3].digest() for s in alone]


def test_the_verdict_reaches_every_rank_as_bytes() -> None:
    def rank0(comm: ThreadComm) -> Any:
        return ranks.run_ranks(comm, lambda: 1)

    def other(comm: ThreadComm) -> Any:
        def fail() -> None:
            raise RecordReadError("cannot read records in /r:3: cut", path="/r", line=3)

        return ranks.run_ranks(comm, fail)

    (code0, err0), (code1, err1) = on_ranks([rank0, other])
    assert (code0, err0) == (1, None)
    assert code1 == 1 and isinstance(err1, RecordReadError)


# --- no pickle-based collective in the package ----------------------------------------

FORBIDDEN = re.compile(
    r"all_gather_object|broadcast_object_list|gather_object|scatter_object_list"
    r"|pickle\.loads?|marshal\.loads?|import pickle|from pickle|Unpickler|def all_gather\("
)


def test_no_pickle_crosses_between_ranks() -> None:
    """The gathers of ftmanifest/distributed and ftmanifest/data: bytes and JSON only."""
    import ftmanifest

    root = Path(ftmanifest.__file__).parent
    found = []
    for folder in ("distributed", "data"):
        for path in sorted((root / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
                hit = FORBIDDEN.search(line)
                if hit:
                    found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert found == []
    from ftmanifest.distributed.comm import Comm

    assert not hasattr(Comm, "all_gather")
    assert FORBIDDEN.search("dist.all_gather_object(out, obj)")  # the pattern can fail
