"""``data check`` on several processes: the same result as one, the reader's own errors."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from ftmanifest.cli.data import _payload
from ftmanifest.data import chunks, parallel
from ftmanifest.data.leak_report import Split
from ftmanifest.data.leakage import check_leakage
from ftmanifest.errors import InputError
from ftmanifest.recordio import iter_records
from tests.conftest import run_cli
from tests.data.leakage_test import MANIFEST, change_words, chat, sentence


def _data(root: Path) -> None:
    """Planted exact and near duplicates across and within splits, with blank lines,
    CRLF line ends, a byte-order mark on line 1 and records with no text."""
    rng = random.Random(23)
    texts = [sentence(rng, 40) for _ in range(300)]
    lines = [json.dumps(chat(t)) for t in texts]
    lines[10] = json.dumps(chat(texts[3].upper()))  # within train, exact
    lines[20] = json.dumps(chat(change_words(texts[4], 1, rng)))  # within train, near
    lines[30] = json.dumps({"messages": []})  # no text
    body = "\n".join(lines[:100]) + "\n\n  \n" + "\r\n".join(lines[100:]) + "\n"
    (root / "train.jsonl").write_bytes(b"\xef\xbb\xbf" + body.encode())
    eval_ = [chat(texts[5]), chat(change_words(texts[6], 1, rng)), chat(sentence(rng, 40))]
    eval_ += [chat(texts[5].lower()), chat(sentence(rng, 40))]  # within eval, exact
    (root / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in eval_))
    test = [chat(change_words(texts[7], 1, rng)), chat(sentence(rng, 40))]
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test))
    (root / "exp.yaml").write_text(MANIFEST.format(ext="jsonl", sealed="true"))


def _splits(root: Path) -> list[Split]:
    return [
        Split("train", "train", root / "train.jsonl"),
        Split("eval", "eval", root / "eval.jsonl"),
        Split("test", "test", root / "test.jsonl", sealed=True),
    ]


def test_two_processes_give_the_same_report_as_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _data(tmp_path)
    monkeypatch.setattr(chunks, "CHUNK_RECORDS", 7)  # many chunks, boundaries everywhere
    one = _payload(check_leakage(_splits(tmp_path), jobs=1), None)
    two = _payload(check_leakage(_splits(tmp_path), jobs=2), None)
    assert one == two
    pairs = {(p["b"], p["a"]): (p["exact"], p["near"]) for p in one["pairs"]}
    assert pairs[("train", "train")] == (1, 1)
    assert pairs[("eval", "eval")] == (1, 0)
    assert pairs[("train", "eval")] == (1, 1)  # texts[5] (twice in eval: one train record)
    assert pairs[("train", "test")] == (0, 1)
    assert one["records"] == {"test": 2, "eval": 5, "train": 300}
    near = next(p for p in one["pairs"] if (p["b"], p["a"]) == ("train", "train"))
    lines = sorted(e["b"]["line"] for e in near["examples"])
    assert lines == [11, 21]  # line numbers survive chunking


def test_cli_json_is_identical_for_jobs_1_and_2(tmp_path: Path) -> None:
    _data(tmp_path)
    out = []
    for jobs in ("1", "2"):
        result = run_cli("data", "check", str(tmp_path / "exp.yaml"), "--jobs", jobs,
                         "--format", "json")  # fmt: skip
        assert result.returncode == 1, result.stderr  # a near duplicate of the sealed test
        payload = json.loads(result.stdout)
        out.append({k: payload[k] for k in ("ok", "threshold", "records", "pairs")})
    assert out[0] == out[1]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_broken_record_deep_in_the_file_is_the_readers_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    _data(tmp_path)
    monkeypatch.setattr(chunks, "CHUNK_RECORDS", 16)
    path = tmp_path / "train.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[150] = b'{"text": "cut'
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError) as serial:
        list(iter_records(path))
    with pytest.raises(InputError) as found:
        check_leakage(_splits(tmp_path), jobs=jobs)
    assert str(found.value) == str(serial.value) and "train.jsonl:151" in str(found.value)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_byte_order_mark_past_line_1_is_refused_at_a_chunk_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """The reader strips a BOM on line 1 only; a chunk that began with one on a later
    line would read it as line 1 of the chunk and accept it."""
    _data(tmp_path)
    monkeypatch.setattr(chunks, "CHUNK_RECORDS", 8)
    path = tmp_path / "train.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[8] = b"\xef\xbb\xbf" + lines[8]  # line 9: a chunk would start there
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError) as serial:
        list(iter_records(path))
    with pytest.raises(InputError) as found:
        check_leakage(_splits(tmp_path), jobs=jobs)
    assert str(found.value) == str(serial.value) and ":9" in str(found.value)


def test_selected_texts_match_the_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ftmanifest.data.text import record_text

    _data(tmp_path)
    monkeypatch.setattr(chunks, "CHUNK_RECORDS", 5)
    path = tmp_path / "train.jsonl"
    wanted = {1, 2, 30, 99, 100, 101, 102, 300}
    got = list(chunks.selected_texts(path, None, (), wanted))
    expect = [(r.number, r.line, record_text(r.value)) for r in iter_records(path)]
    assert got == [e for e in expect if e[0] in wanted]
    assert [n for n, _l, _t in got] == sorted(wanted)


def test_small_inputs_stay_in_one_process_and_jobs_is_checked(tmp_path: Path) -> None:
    _data(tmp_path)
    assert parallel.default_jobs([tmp_path / "train.jsonl"]) == 1
    assert parallel.cores() >= 1
    result = run_cli("data", "check", str(tmp_path / "exp.yaml"), "--jobs", "-1")
    assert result.returncode == 2 and "--jobs" in result.stderr
    assert "Traceback" not in result.stderr


# --- data check --distributed on a real two-rank torchrun job (gloo, CPU) ------------

KEYS = ("ok", "threshold", "threshold_source", "records", "pairs", "leaking_train_records")


def _project(folder: Path, filler: int = 24_000) -> Path:
    """``_data`` with ``filler`` unrelated training records after it: about 7 MiB, so
    7 chunks of 1 MiB, more than one round of 3 chunks per rank."""
    folder.mkdir(parents=True)
    _data(folder)
    rng = random.Random(99)
    words = [f"w{i}" for i in range(5000)]
    filled = [json.dumps({"text": " ".join(rng.choices(words, k=45))}) for _ in range(filler)]
    if filler:  # leaks far from the start: their numbers depend on the chunks' order
        filled[filler // 2] = (folder / "eval.jsonl").read_text().splitlines()[2]
        filled.append(filled[filler // 3])
    with open(folder / "train.jsonl", "a", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in filled))
    return folder / "exp.yaml"


def test_distributed_check_equals_the_single_process_run(tmp_path: Path) -> None:
    from tests.distributed.launch import verify_job

    manifest = _project(tmp_path / "project")
    alone = run_cli("data", "check", str(manifest), "--format", "json", "--jobs", "1")
    assert alone.returncode == 1, alone.stderr
    assert (manifest.parent / "train.jsonl").stat().st_size > 6 * chunks.CHUNK_BYTES
    argv = ["data", "check", str(manifest), "--format", "json", "--distributed",
            "--rank-timeout", "60"]  # fmt: skip
    job = verify_job(tmp_path / "job", argv)
    assert job.codes() == {0: 1, 1: 1}, job.log + job.ranks[0].err + job.ranks[1].err
    ranked = json.loads(job.ranks[0].out)
    single = json.loads(alone.stdout)
    assert {k: ranked[k] for k in KEYS} == {k: single[k] for k in KEYS}
    far = [e["b"]["line"] for p in single["pairs"] for e in p["examples"] if p["b"] == "train"]
    assert max(far) > 12_000  # the planted leaks past the first chunks were found
    assert "rank 1: signed its share" in job.ranks[1].err and job.ranks[1].out == ""


def test_distributed_a_rank_whose_copy_is_broken_stops_every_rank(tmp_path: Path) -> None:
    """Each rank reads its own copy of the project, both with the same broken line in
    the second chunk (so the copies agree and the read is what fails), which rank 1
    signs: every rank exits 2, rank 0 with the reader's own error (naming rank 1's
    file and line)."""
    from tests.distributed.launch import verify_job

    for rank in (0, 1):  # the same broken copy on both: the copies agree, then the read fails
        broken = _project(tmp_path / f"p{rank}").parent / "train.jsonl"
        lines = broken.read_bytes().split(b"\n")
        at = next(i for i, n in enumerate(_offsets(lines)) if n > chunks.CHUNK_BYTES + 5000)
        lines[at] = b'{"text": "cut'
        broken.write_bytes(b"\n".join(lines))
    argv = ["data", "check", str(tmp_path / "p{rank}" / "exp.yaml"), "--distributed",
            "--rank-timeout", "60"]  # fmt: skip
    job = verify_job(tmp_path / "job", argv)
    assert job.codes() == {0: 2, 1: 2}, job.log + job.ranks[0].err + job.ranks[1].err
    assert f"p1/train.jsonl:{at + 1}" in job.ranks[0].err, job.ranks[0].err
    assert "Traceback" not in job.ranks[0].err
    assert "exit 2 as rank 0" in job.ranks[1].err


def test_distributed_a_rank_whose_copy_differs_is_refused_before_any_record_is_read(
    tmp_path: Path,
) -> None:
    """Rank 1's copy has one line more: every rank refuses (exit 1) naming rank 1, and
    no rank reads a record of it (rank 0 judged only its own copy)."""
    from tests.distributed.launch import verify_job

    _project(tmp_path / "p0")
    other = _project(tmp_path / "p1").parent / "train.jsonl"
    other.write_bytes(other.read_bytes() + b'{"text": "one more", "label": "billing"}\n')
    argv = ["data", "check", str(tmp_path / "p{rank}" / "exp.yaml"), "--distributed",
            "--rank-timeout", "60"]  # fmt: skip
    job = verify_job(tmp_path / "job", argv)
    assert job.codes() == {0: 1, 1: 1}, job.log + job.ranks[0].err + job.ranks[1].err
    for rank in (0, 1):
        err = job.ranks[rank].err
        assert "rank 1 (" in err and "its copy differs on data[0].digest" in err, err
        assert "reason: node-copies-differ" in err, err
    assert "leakage" not in job.ranks[0].out.lower()


def _offsets(lines: list[bytes]) -> list[int]:
    out, at = [], 0
    for line in lines:
        out.append(at)
        at += len(line) + 1
    return out


def test_distributed_needs_a_launcher(tmp_path: Path) -> None:
    manifest = _project(tmp_path / "project", filler=0)
    result = run_cli("data", "check", str(manifest), "--distributed")
    assert result.returncode == 2 and "WORLD_SIZE" in result.stderr
    result = run_cli("data", "check", str(manifest), "--rank-timeout", "5")
    assert result.returncode == 2 and "--rank-timeout needs --distributed" in result.stderr


def test_a_worker_that_dies_is_an_error_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ftmanifest.errors import FtManifestError

    _data(tmp_path)
    monkeypatch.setattr(parallel, "_sign_in_worker", _die)  # inherited by the forked workers
    with pytest.raises(FtManifestError, match="signing process died") as found:
        check_leakage(_splits(tmp_path), jobs=2)
    assert found.value.field == "--jobs"


def _die(job: object) -> None:
    os._exit(9)


def test_distributed_ranks_started_with_other_fields_are_refused_before_reading(
    tmp_path: Path,
) -> None:
    """Rank 1 is told to compare another field: every rank refuses (exit 1) naming rank 1
    and the argument, before any record is read."""
    from tests.distributed.launch import verify_job

    _project(tmp_path / "p0")
    argv = ["data", "check", str(tmp_path / "p0" / "exp.yaml"), "--distributed",
            "--rank-timeout", "60", "--field", "text{rank}"]  # fmt: skip
    job = verify_job(tmp_path / "job", argv)
    assert job.codes() == {0: 1, 1: 1}, job.log + job.ranks[0].err + job.ranks[1].err
    for rank in (0, 1):
        err = job.ranks[rank].err
        assert "the ranks were started with different arguments" in err, err
        assert "rank 1 (" in err and "--field differs from rank(s) 0" in err, err
