"""``data.pools``: one LSH query of the pooled earlier splits gives what one query of
each split's own index gives, and the leakage counts stay per split pair."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rensa import RMinHash, RMinHashLSH

from ftmanifest.data import leakage
from ftmanifest.data.leak_report import Split
from ftmanifest.data.leakage import check_leakage, lsh_shape
from ftmanifest.data.pools import Pools
from ftmanifest.data.text import NUM_PERM, SEED, shingle_list
from tests.data.leakage_test import change_words, chat, pair, sentence, write_jsonl

STANDARD = {"test": ["test"], "eval": ["test", "eval"], "train": ["test", "eval", "train"]}


def _index() -> RMinHashLSH:
    bands, _rows = lsh_shape(0.8)
    return RMinHashLSH(threshold=0.8, num_perm=NUM_PERM, num_bands=bands)


def _minhash(text: str) -> RMinHash:
    m = RMinHash(num_perm=NUM_PERM, seed=SEED)
    m.update(shingle_list(text))
    return m


def test_pools_join_the_earlier_splits_of_a_later_one() -> None:
    pools = Pools(STANDARD, _index)
    assert pools.members == {"train": ("test", "eval")}
    assert pools.alone("test")  # eval queries test's index by itself
    assert not pools.alone("eval") and not pools.alone("train")  # train pools eval
    single = Pools({"eval": ["eval"], "train": ["eval", "train"]}, _index)
    assert single.members == {} and single.alone("eval")  # one partner: nothing to pool


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), big=st.booleans())
def test_one_pooled_query_is_one_query_per_split(seed: int, big: bool) -> None:
    """Records of three earlier splits, many of them near copies of each other (a few
    words changed), so most queries share bands with several keys of several splits."""
    rng = random.Random(seed)
    names = ["test", "eval", "other"]
    partners = {"train": [*names, "train"]}
    pools = Pools(partners, _index)
    own = {name: _index() for name in names}
    bases = [sentence(rng, 40) for _ in range(4)]
    offset = 2**40 if big else 0  # record numbers far past the key width
    for name in names:
        for number in range(1, 30):
            text = change_words(rng.choice(bases), rng.randrange(0, 8), rng)
            m = _minhash(text)
            own[name].insert(offset + number, m)
            pools.insert(name, offset + number, m)
    for _ in range(30):
        m = _minhash(change_words(rng.choice(bases), rng.randrange(0, 12), rng))
        expected = {name: sorted(own[name].query(m)) for name in names}
        got = pools.query("train", m)
        assert {k: sorted(v) for k, v in got.items()} == {k: v for k, v in expected.items() if v}


def test_counts_stay_per_split_pair_when_pooled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training record that repeats an eval record exactly and nearly repeats a test
    record; one near both; eval records from one template that bound the train/eval
    search at MAX_PAIRS while train/test, in the same pooled query, stays complete."""
    monkeypatch.setattr(leakage, "MAX_PAIRS", 20)
    rng = random.Random(8)
    template = sentence(rng, 75)
    test_texts = [sentence(rng) for _ in range(3)]
    eval_texts = [template + " " + sentence(rng, 3) for _ in range(8)] + [sentence(rng)]
    train = [
        chat(eval_texts[-1]),  # exact copy of eval
        chat(change_words(test_texts[0], 1, rng)),  # near test
        chat(change_words(test_texts[1], 2, rng)),  # near test
        *[chat(template + " " + sentence(rng, 3)) for _ in range(5)],  # near every template
        *[chat(sentence(rng)) for _ in range(20)],  # control: unrelated
    ]
    write_jsonl(tmp_path / "train.jsonl", train)
    write_jsonl(tmp_path / "eval.jsonl", [chat(t) for t in eval_texts])
    write_jsonl(tmp_path / "test.jsonl", [chat(t) for t in test_texts])
    splits = [
        Split("train", "train", tmp_path / "train.jsonl"),
        Split("eval", "eval", tmp_path / "eval.jsonl"),
        Split("test", "test", tmp_path / "test.jsonl", sealed=True),
    ]
    report = check_leakage(splits)
    train_test, train_eval = pair(report, "test", "train"), pair(report, "eval", "train")
    assert (train_test.exact, train_test.near, train_test.complete) == (0, 2, True)
    assert train_eval.exact == 1 and not train_eval.complete  # 5 x 8 pairs > 20
    monkeypatch.setattr(leakage, "MAX_PAIRS", 10_000)
    report = check_leakage(splits, jobs=2)
    train_eval = pair(report, "eval", "train")
    assert (train_eval.exact, train_eval.near, train_eval.complete) == (1, 5 * 8, True)
    assert sorted(report.leaking["train"]) == list(range(1, 9))
