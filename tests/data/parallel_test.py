"""``data check`` on several processes: the same result as one, the reader's own errors."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ftmanifest.cli.data import _payload
from ftmanifest.data import parallel
from ftmanifest.data.leakage import Split, check_leakage
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
    monkeypatch.setattr(parallel, "CHUNK_RECORDS", 7)  # many chunks, boundaries everywhere
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
    monkeypatch.setattr(parallel, "CHUNK_RECORDS", 16)
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
    monkeypatch.setattr(parallel, "CHUNK_RECORDS", 8)
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
    monkeypatch.setattr(parallel, "CHUNK_RECORDS", 5)
    path = tmp_path / "train.jsonl"
    wanted = {1, 2, 30, 99, 100, 101, 102, 300}
    got = list(parallel.selected_texts(path, None, (), wanted))
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
