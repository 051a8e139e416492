"""The leakage check's first pass also searches for contained items and counts the
statistics: each record is parsed and normalised once.  What it finds must be what
the separate passes find, record for record.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.data import contain, leak_report, leakage, stats
from ftmanifest.data.leak_report import Split
from ftmanifest.data.leakage import check_leakage
from ftmanifest.data.text import input_pieces, normalise, record_text
from tests.data.leakage_disguise_test import DISGUISES, ITEM, _realistic, chat
from tests.data.leakage_test import write_jsonl


def _data(root: Path, rng: random.Random) -> list[Split]:
    test = _realistic(rng, 300) + [chat(ITEM, "negative")]
    train = _realistic(rng, 3000)
    for k, record in enumerate(DISGUISES.values()):
        train.insert(37 * k + 5, record)
    for k in range(0, 300, 11):  # items of every shape inside longer records, some
        pieces = input_pieces(test[k])  # behind a system prompt (whole text != task text)
        system = "You help." if k % 2 else None
        train.insert(k * 9, chat("Look at this: " + " ".join(pieces) + " Thanks.", "ok", system))
    eval_ = _realistic(rng, 200) + [train[40], chat(ITEM + " And more words here.", "x")]
    write_jsonl(root / "test.jsonl", test)
    write_jsonl(root / "eval.jsonl", eval_)
    write_jsonl(root / "train.jsonl", train)
    return [
        Split("train", "train", root / "train.jsonl"),
        Split("eval", "eval", root / "eval.jsonl"),
        Split("test", "test", root / "test.jsonl", sealed=True),
    ]


def _seen(report: leak_report.LeakageReport) -> Any:
    return (
        report.leaking,
        [(p.a, p.b, p.exact, p.near, p.examples, p.refused) for p in report.pairs],
        report.excerpts,
        report.records,
    )


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_one_pass_finds_what_the_separate_passes_find(
    tmp_path: Path, jobs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    splits = _data(tmp_path, random.Random(5))
    collector = stats.Collector()
    together = check_leakage(splits, jobs=jobs, collector=collector)
    assert set(collector.stats) == {"train", "eval", "test"}  # the one pass ran
    monkeypatch.setattr(leakage, "_lines_only", lambda _splits: False)
    apart = check_leakage(splits, jobs=jobs, collector=stats.Collector())
    assert _seen(together) == _seen(apart)
    assert len(together.leaking["train"]) >= 30  # the planted copies are found
    for split in splits:
        alone = stats.collect(split)
        counted = collector.stats[split.name]
        assert (counted.records, counted.unlabelled, counted.categories) == (
            alone.records, alone.unlabelled, alone.categories)  # fmt: skip
        assert counted.chars.summary() == alone.chars.summary()
        assert counted.chars.buckets == alone.chars.buckets


def _labelled(rng: random.Random, n: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(n):
        kind = rng.random()
        label: Any = rng.choice(["a", "b", "c", "d", "e", "f", stats.OTHER, 1, [2], None])
        if kind < 0.1:
            out.append("a text line " * rng.randint(0, 200))
        elif kind < 0.2:
            out.append({"text": "x" * rng.randint(0, 3000)})
        else:
            out.append({"text": "y" * rng.randint(0, 50), "label": label})
    return out


@pytest.mark.parametrize("seed", range(20))
def test_tallies_merged_in_order_are_collect_one_by_one(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Categories past the cap, in whatever chunks, land where ``collect`` puts them."""
    monkeypatch.setattr(stats, "MAX_CATEGORIES", 4)
    rng = random.Random(seed)
    values = _labelled(rng, rng.randint(0, 300))
    expected = stats.SplitStats("s", "train", "p")
    for value in values:  # collect's own loop, without a file
        category = stats.label_of(value)
        if category is None:
            expected.unlabelled += 1
        elif category in expected.categories or len(expected.categories) < 4:
            expected.categories[category] += 1
        else:
            expected.categories[stats.OTHER] += 1
        expected.chars.add(len(record_text(value)))
        expected.records += 1
    merged = stats.SplitStats("s", "train", "p")
    at = 0
    while at < len(values):
        step = rng.randint(1, 40)
        stats.merge(merged, stats.tally(values[at : at + step], ()))
        at += step
    assert list(merged.categories.items()) == list(expected.categories.items())
    assert (merged.records, merged.unlabelled) == (expected.records, expected.unlabelled)
    assert merged.chars.buckets == expected.chars.buckets
    assert (merged.chars.min, merged.chars.max, merged.chars.count) == (
        expected.chars.min, expected.chars.max, expected.chars.count)  # fmt: skip


WORDS = ["cable", "frayed", "support", "ticket", "the", "a", "of", "&amp;", "**bold**", "x,",
         "Ａｌｐｈａ", "Вох", "end.", "(note)", "don't", "_it_", "&", "é"]  # fmt: skip


@pytest.mark.parametrize("seed", range(30))
def test_a_piece_is_found_exactly_where_it_stands_inside_a_record(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index looks each piece up by three of its inner words: a filter only, so what
    ``_match`` finds is every piece ``_inside`` the record's normalised text."""
    rng = random.Random(seed)
    items = [
        (n, 1, {"text": " ".join(rng.choices(WORDS, k=rng.randint(8, 14)))}) for n in range(40)
    ]
    index = contain.build_index([("test", iter(items))], ())
    monkeypatch.setattr(contain, "_INDEX", index)
    monkeypatch.setattr(contain, "_SEEN", Counter())
    total = 0
    for _ in range(60):
        contain._SEEN.clear()
        host = " ".join(rng.choices(WORDS, k=rng.randint(0, 10)))
        inner = items[rng.randrange(len(items))][2]["text"]
        glue = rng.choice([" ", "", ", ", "\n"])
        value = {"text": host + glue + inner + glue + " ".join(rng.choices(WORDS, k=3))}
        whole = normalise(record_text(value))
        found = sorted(i for how, i in contain._match(value, ()) if how == "contained")
        expected = [
            pid
            for pids in index.anchors.values()
            for pid in pids
            if contain._inside(index.pieces[pid], whole)
        ]
        assert found == sorted(expected)
        total += len(found)
    assert total >= 5  # records hold the piece pasted into them: the test is not empty
