"""``data check`` over a folder of shards: one split read shard by shard,
its records numbered on across the shards, each finding naming its shard and line.

Until this, a data entry that is a folder was refused ("is a folder"), so the check a
trainer's glob of shards needs could not run at all."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from ftmanifest.data import chunks, parallel, ranks
from ftmanifest.data.check import check_data
from ftmanifest.data.leak_report import Split
from ftmanifest.data.leakage import check_leakage
from ftmanifest.data.shards import shard_names
from ftmanifest.errors import InputError, UsageError
from tests.conftest import run_cli
from tests.data.leakage_test import chat, sentence, write_jsonl

MANIFEST = """\
ftmanifest: 1
experiment: {id: shards}
model: {path: model}
data:
  - {name: train, role: train, path: train}
  - {name: test, role: test, path: test.jsonl, sealed: true}
"""


def _project(root: Path, per_shard: int = 3, shards: int = 12) -> tuple[Path, list[str]]:
    """``train/`` a folder of JSONL shards (two levels, some empty or blank-lined);
    ``test.jsonl`` copies one record of shard ``b/part-07.jsonl`` (its line 2)."""
    rng = random.Random(31)
    texts = [sentence(rng, 60) for _ in range(per_shard * shards)]
    for s in range(shards):
        sub = "a" if s < shards // 2 else "b"
        (root / "train" / sub).mkdir(parents=True, exist_ok=True)
        rows = [chat(t) for t in texts[s * per_shard : (s + 1) * per_shard]]
        path = root / "train" / sub / f"part-{s:02d}.jsonl"
        body = "".join(json.dumps(r) + "\n" for r in rows)
        path.write_text(("\n" if s == 3 else "") + body)  # a blank first line: lines stay true
    (root / "train" / "a" / "part-empty.jsonl").write_text("")  # no record at all
    write_jsonl(root / "test.jsonl", [chat(texts[7 * per_shard + 1]), chat(sentence(rng))])
    manifest = root / "exp.yaml"
    manifest.write_text(MANIFEST)
    return manifest, texts


def test_a_copy_in_one_shard_is_refused_naming_the_shard_and_its_line(tmp_path: Path) -> None:
    manifest, _texts = _project(tmp_path)
    got = check_data(manifest, threshold=0.8, jobs=1)
    assert not got.ok
    pair = next(p for p in got.leakage.pairs if (p.a, p.b) == ("test", "train"))
    assert pair.exact == 1 and pair.refused
    [match] = pair.examples
    assert (match.b.shard, match.b.line) == ("b/part-07.jsonl", 2)
    assert match.b.record == 7 * 3 + 2  # numbered on across the shards (the empty one holds none)
    assert got.leakage.records["train"] == 36
    assert got.leakage.leaking["train"] == {23}

    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train/b/part-07.jsonl:2" in result.stdout
    payload = json.loads(run_cli("data", "check", str(manifest), "--format", "json").stdout)
    first = next(p for p in payload["pairs"] if (p["a"], p["b"]) == ("test", "train"))
    assert first["examples"][0]["b"] | {"text": None} == {
        "split": "train", "record": 23, "line": 2, "shard": "b/part-07.jsonl", "text": None
    }  # fmt: skip
    assert "shard" not in first["examples"][0]["a"]  # a split that is one file: as before


def test_the_folder_reads_as_its_shards_joined_in_name_order(tmp_path: Path) -> None:
    """The same records as one file made of the shards in sorted order: counts, the
    records found and near duplicates alike, for one process and for several."""
    manifest, _texts = _project(tmp_path)
    rng = random.Random(5)
    near = (tmp_path / "train" / "a" / "part-02.jsonl").read_text().splitlines()[0]
    words = json.loads(near)["messages"][0]["content"].split(" ")
    words[3] = "changed"
    write_jsonl(tmp_path / "test.jsonl", [chat(" ".join(words)), chat(sentence(rng))])
    joined = tmp_path / "joined.jsonl"
    with joined.open("w") as out:
        for name in shard_names(tmp_path / "train"):
            text = (tmp_path / "train" / name).read_text()
            out.write("".join(line + "\n" for line in text.splitlines() if line.strip()))
    test = Split("test", "test", tmp_path / "test.jsonl", sealed=True)
    folder = Split("train", "train", tmp_path / "train", shards=shard_names(tmp_path / "train"))
    one = check_leakage([Split("train", "train", joined), test], jobs=1)
    for jobs in (1, 2):
        many = check_leakage([folder, test], jobs=jobs)
        assert many.records == one.records
        assert many.leaking == one.leaking == {"train": {7}}
        pair = next(p for p in many.pairs if p.b == "train" and p.a == "test")
        assert (pair.exact, pair.near) == (0, 1)
        assert pair.examples[0].b.shard == "a/part-02.jsonl"


def test_small_shards_are_signed_in_batches_the_same_in_every_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest, _texts = _project(tmp_path, per_shard=1, shards=40)
    folder = Split("train", "train", tmp_path / "train", shards=shard_names(tmp_path / "train"))
    jobs = list(chunks.shard_chunks(folder.path, None, (), folder.shards))
    assert len(jobs) == 1 and isinstance(jobs[0], chunks._Batch)  # forty shards, one job
    monkeypatch.setattr(chunks, "CHUNK_RECORDS", 4)
    assert len(list(chunks.shard_chunks(folder.path, None, (), folder.shards))) == 10
    with parallel.Workers(1) as one, parallel.Workers(2) as two:
        alone = [
            (n, line, h) for n, line, h, _m in one.signatures(folder.path, None, (), folder.shards)
        ]  # noqa: E501
        forked = [
            (n, line, h) for n, line, h, _m in two.signatures(folder.path, None, (), folder.shards)
        ]  # noqa: E501
    assert alone == forked and [n for n, _l, _h in alone] == list(range(1, 41))


def test_shards_of_other_formats_are_read_by_their_suffix(tmp_path: Path) -> None:
    manifest, texts = _project(tmp_path)
    (tmp_path / "train" / "c.csv").write_text("text,label\n" + f'"{texts[0]}",x\n' + "hello,y\n")
    got = check_data(manifest, threshold=0.8, jobs=1)
    within = next(p for p in got.leakage.pairs if p.a == p.b == "train")
    assert within.near == 1  # the CSV row repeats a JSONL record's text (without its answer)
    assert {m.b.shard for m in within.examples} == {"c.csv"}
    assert got.leakage.records["train"] == 38


def test_a_file_that_is_not_records_is_refused_by_name_not_skipped(tmp_path: Path) -> None:
    manifest, _texts = _project(tmp_path)
    (tmp_path / "train" / "README.md").write_text("# the shards\n")
    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 2 and "README.md" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    (tmp_path / "train" / "README.md").unlink()
    (tmp_path / "train" / "b" / "part-09.jsonl").write_text('{"text": "a"}\n{broken\n')
    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 2 and "part-09.jsonl:2" in result.stderr, result.stderr


@pytest.mark.parametrize("kind", ["link-out", "link-dir", "fifo"])
def test_links_out_and_special_files_are_refused_naming_them(tmp_path: Path, kind: str) -> None:
    manifest, _texts = _project(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "more.jsonl").write_text('{"text": "not pinned with the folder"}\n')
    where = tmp_path / "train" / "a" / "zz.jsonl"
    if kind == "link-out":
        where.symlink_to(outside / "more.jsonl")
    elif kind == "link-dir":
        where.symlink_to(outside)
    else:
        os.mkfifo(where)
    with pytest.raises(InputError) as caught:
        check_data(manifest, threshold=0.8, jobs=1)
    assert caught.value.path == str(where) and caught.value.loc == ("data", 0, "path")
    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 2 and "zz.jsonl" in result.stderr


def test_a_git_folder_is_not_data_as_the_tree_digest_skips_it(tmp_path: Path) -> None:
    from ftmanifest.hashing.tree import hash_tree

    manifest, _texts = _project(tmp_path)
    before = hash_tree(tmp_path / "train", use_cache=False).digest
    (tmp_path / "train" / ".git").mkdir()
    (tmp_path / "train" / ".git" / "config").write_text("[core]\n")
    assert hash_tree(tmp_path / "train", use_cache=False).digest == before
    assert not any(n.startswith(".git") for n in shard_names(tmp_path / "train"))
    assert check_data(manifest, threshold=0.8, jobs=1).leakage.records["train"] == 36


def test_a_link_to_a_shard_inside_the_folder_is_read(tmp_path: Path) -> None:
    manifest, _texts = _project(tmp_path)
    (tmp_path / "train" / "a" / "again.jsonl").symlink_to(
        tmp_path / "train" / "b" / "part-11.jsonl"
    )
    got = check_data(manifest, threshold=0.8, jobs=1)
    within = next(p for p in got.leakage.pairs if p.a == p.b == "train")
    assert within.exact == 3 and got.leakage.records["train"] == 39


def test_an_empty_folder_and_write_clean_are_refused_clearly(tmp_path: Path) -> None:
    manifest, _texts = _project(tmp_path)
    with pytest.raises(UsageError, match="folder of 13 shards"):
        check_data(manifest, threshold=0.8, write_clean_to=tmp_path / "clean.jsonl")
    assert not (tmp_path / "clean.jsonl").exists()
    for p in sorted((tmp_path / "train").rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    with pytest.raises(InputError, match="holds no files"):
        check_data(manifest, threshold=0.8)


def test_categories_and_samples_count_every_shard(tmp_path: Path) -> None:
    manifest, _texts = _project(tmp_path)
    got = check_data(manifest, threshold=0.8, jobs=1)
    [train] = [s for s in got.summary.stats if s.name == "train"]
    assert train.records == 36
    result = run_cli("data", "sample", str(manifest), "--split", "train", "--format", "json",
                     "--per-category", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    picks = [
        ex for s in json.loads(result.stdout)["splits"] for c in s["categories"]
        for ex in c["examples"]
    ]  # fmt: skip
    assert picks and all(ex["shard"].startswith(("a/", "b/")) for ex in picks)


def test_thread_ranks_sign_a_folder_exactly_as_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under --distributed every rank cuts the folder into the same jobs: rank 0's
    signatures and shard marks are one process's."""
    from ftmanifest.data.shards import Marks
    from tests.distributed.threads import on_ranks

    monkeypatch.setattr(chunks, "CHUNK_RECORDS", 4)  # 36 records: 9 batches, 2 rounds
    _project(tmp_path)
    names = shard_names(tmp_path / "train")
    marks = Marks()
    with parallel.Workers(1) as workers:
        alone = list(workers.signatures(tmp_path / "train", None, (), names, marks))

    def rank(comm):  # type: ignore[no-untyped-def]
        mine = Marks()
        with parallel.Workers(1) as workers:
            signer = ranks.RankSigner(comm, workers, batch=1)
            got = list(signer.signatures(tmp_path / "train", None, (), names, mine))
        return got, mine.firsts, mine.names

    results = on_ranks([rank, rank])
    got, firsts, shard_of = results[0]
    assert [s[:3] for s in got] == [s[:3] for s in alone] and len(alone) == 36
    assert (firsts, shard_of) == (marks.firsts, marks.names)
    assert results[1][0] == []


def test_the_copy_data_check_names_is_what_datasets_loads_from_the_folder(
    tmp_path: Path,
) -> None:
    """The real loader, on the folder as a trainer globs it, holds the record that
    data check refuses, at the place data check names (shard order, then line)."""
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    manifest, _texts = _project(tmp_path)
    got = check_data(manifest, threshold=0.8, jobs=1)
    [match] = next(p for p in got.leakage.pairs if (p.a, p.b) == ("test", "train")).examples
    files = [str(tmp_path / "train" / n) for n in shard_names(tmp_path / "train")]
    loaded = datasets.load_dataset(
        "json", data_files=files, split="train", cache_dir=str(tmp_path / "hf")
    )
    test = json.loads((tmp_path / "test.jsonl").read_text().splitlines()[0])
    assert len(loaded) == got.leakage.records["train"]
    assert loaded[match.b.record - 1]["messages"] == test["messages"]
