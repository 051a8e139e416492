"""The one walk of a record (``walk.RecordTexts``) and the joined normalisation
(``text.join_normalised``) give what the separate functions give, on adversarial text:
HTML references and NFKC forms split by the join, combining marks and punctuation at
the join, look-alikes, invisible and astral characters.
"""

from __future__ import annotations

import html
import json
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ftmanifest.data import contain, stats, text
from ftmanifest.data.text import (
    input_pieces,
    join_normalised,
    normalise,
    normalise_piece,
    record_text,
    shingle_list,
    task_text,
)
from ftmanifest.data.walk import RecordTexts

TRICKS = [
    "a", "B", "word", "Don't", "x,", " ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u2028",
    "\x1c", "\x85", ",", ".", "(", ")", "!", "-", "&", "&amp;", "amp;", "&amp", "&#39;",
    "#39;", "&#", "39", "&lt", "lt;", "&#128512;", "&#x2a;", "&#42;", "*", "_", "`", "~",
    "**", "\u0301", "e\u0301", "\u1100", "\u1161", "\u11a8", "\ufb01", "ß", "Ａ", "＆",
    "\ufe60", "；", "\u200b", "\u200d", "\ufeff", "\U000e0041", "\U00010100",
    "\U0001f600", "Ω", "\u0345", "İ", "Вох", "α", "\u3164", "\ufe0f", "、", "。", "…",
    "—", '"', "\u00b4", "\u2460", "\uff08",
]  # fmt: skip
"""Pieces of text that change under normalisation, or join with what stands beside them."""

tricky = (
    st.lists(st.sampled_from(TRICKS), max_size=10).map("".join)
    | st.text(max_size=12)
    | st.text("aZ09 \t\n,.&;#*_", max_size=16)  # plain ASCII, and ASCII just short of it
)


def _original_once(raw: str) -> str:
    """``text._once`` as it was written before its plain-ASCII exit: the reference."""
    astral = False
    while True:
        if raw.isascii():
            raw = raw.lower()
        else:
            astral = astral or max(raw) > "\uffff"
            invisible = text._classes(astral)[0]
            previous = None
            while raw != previous:
                previous = raw
                raw = invisible.sub("", unicodedata.normalize("NFKD", raw))
                raw = unicodedata.normalize("NFKC", raw).translate(text.CONFUSABLES).casefold()
        again = False
        if "*" in raw or "_" in raw or "`" in raw or "~" in raw:
            bare = text._MARKUP.sub("", raw)
            again = bare != raw and not bare.isascii()
            raw = bare
        if "&" in raw:
            decoded = html.unescape(raw)
            again, raw = again or decoded != raw, decoded
        if not again:
            break
    raw = " ".join(raw.split())
    if " " not in raw:
        return raw
    if not raw.isascii():
        return text._classes(astral)[1].sub("", raw)
    for p in text._ASCII_P:
        raw = raw.replace(" " + p, p).replace(p + " ", p)
    return raw


def _old_normalise(raw: str) -> str:
    """``normalise`` as it was written before ``normalise_piece``: the reference."""
    while True:
        out = _original_once(raw)
        if "&" not in out:
            return out
        again = _original_once(out)
        if again == out:
            return out
        raw = again


@settings(max_examples=400, deadline=None)
@given(st.lists(tricky, max_size=4), st.sampled_from(["\n", " "]))
def test_pieces_normalised_apart_and_joined_are_the_joined_text_normalised(
    pieces: list[str], sep: str
) -> None:
    joined = join_normalised([normalise_piece(p) for p in pieces])
    if joined is not None:  # None: the caller normalises the joined text instead
        assert joined == _old_normalise(sep.join(pieces))


@settings(max_examples=300, deadline=None)
@given(tricky | st.text("ab1 ,(", max_size=10))
@example("a , b ( c")
@example("Plain  TEXT 42 ")
def test_normalise_piece_is_normalise(raw: str) -> None:
    out, _one_pass = normalise_piece(raw)
    assert out == normalise(raw) == _old_normalise(raw)


def test_the_join_is_taken_for_plain_text_and_refused_where_a_reference_spans_it() -> None:
    """Control: the fast join is used on ordinary turns (the test above is not empty),
    and refused where a reference could form across the join."""
    parts = ["Hello there, how ARE you?", "(fine) thanks", "", "ok."]
    joined = join_normalised([normalise_piece(p) for p in parts])
    assert joined == normalise("\n".join(parts)) == "hello there,how are you?(fine)thanks ok."
    spanning = ["a &", "amp;lt; b"]  # "& amp;lt;" joined: the space goes, a reference forms
    assert join_normalised([normalise_piece(p) for p in spanning]) is None
    assert normalise(" ".join(spanning)) == "a<b"


json_leaf = st.none() | st.booleans() | st.integers(-5, 5) | tricky
role = st.sampled_from(["user", "assistant", "system", "developer", "SYSTEM", "Model", "tool",
                        "gpt", "", None, 3])  # fmt: skip
part = st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": tricky}) | tricky
content = tricky | st.lists(part, max_size=3) | st.none() | st.integers(0, 3)
turn = st.fixed_dictionaries({"content": content}, optional={"role": role})
turns = st.lists(turn, max_size=4)
anything = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky, inner, max_size=3),
    max_leaves=8,
)
record = (
    st.fixed_dictionaries({"messages": turns}, optional={"label": json_leaf, "x": anything})
    | st.fixed_dictionaries({"messages": anything})
    | st.fixed_dictionaries(
        {},
        optional={
            "prompt": turns | tricky,
            "completion": turns | tricky,
            "text": tricky,
            "output": anything,
        },
    )  # fmt: skip
    | tricky
    | anything
)
fields = st.sampled_from([(), ("messages",), ("prompt", "text"), ("x",)])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record, fields)
def test_one_walk_gives_what_the_separate_functions_give(value: Any, keys: tuple[str, ...]) -> None:
    texts = RecordTexts(value, keys)
    assert texts.task_raw == task_text(value, keys)
    assert texts.pieces == input_pieces(value, keys)
    assert texts.whole_length == len(record_text(value, keys))
    assert texts.task == _old_normalise(task_text(value, keys))
    texts.cut = shingle_list(texts.task)
    assert texts.whole == _old_normalise(record_text(value, keys))
    assert texts.whole_cut == shingle_list(_old_normalise(record_text(value, keys)))
    assert texts.input == _old_normalise(" ".join(input_pieces(value, keys)))
    for raw in input_pieces(value, keys):
        assert texts.piece(raw) == _old_normalise(raw)


def chat(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"messages": [{"role": r, "content": c} for r, c in turns]}


def test_a_chat_record_is_walked_once() -> None:
    """Control: the one walk covers chat records (the shape the check reads most)."""
    value = chat(("system", "Be brief."), ("user", "What is 2+2?"), ("assistant", "4."))
    texts = RecordTexts(value)
    assert texts._parts is not None
    assert (texts.task, texts.whole, texts.input) == ("what is 2+2?4.", "be brief.what is 2+2?4.",
                                                      "what is 2+2?")  # fmt: skip
    assert RecordTexts({"text": "x"})._parts is None  # other shapes: text's own functions


def test_a_reference_split_across_turns_is_normalised_as_the_joined_text() -> None:
    value = chat(("user", "price &"), ("assistant", "amp;lt; 5 &"), ("user", "#42; **bold**"))
    texts = RecordTexts(value)
    assert texts.task == normalise(task_text(value))
    assert texts.input == normalise(" ".join(input_pieces(value)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1 << 40) | st.integers(0, 2000), max_size=50))
def test_a_histogram_filled_at_once_is_one_filled_one_by_one(values: list[int]) -> None:
    one, many = stats.Histogram(), stats.Histogram()
    for v in values:
        one.add(v)
    many.add_all(values)
    assert list(many.buckets.items()) == list(one.buckets.items())
    assert (many.count, many.min, many.max) == (one.count, one.min, one.max)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record, max_size=6))
def test_a_tally_given_the_lengths_counts_what_it_counts_without(values: list[Any]) -> None:
    lengths = [RecordTexts(v).whole_length for v in values]
    given_, counted = stats.tally(values, (), None, lengths), stats.tally(values, ())
    assert given_[:3] == counted[:3]
    assert given_[3].buckets == counted[3].buckets
    assert (given_[3].min, given_[3].max, given_[3].count) == (
        counted[3].min, counted[3].max, counted[3].count)  # fmt: skip


@pytest.mark.parametrize("system", [None, "You help."])
def test_a_match_with_the_shared_texts_is_a_match_without(
    system: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``examine`` reuses the signed task text's shingles; a record searched on its own
    (the separate pass) finds the same pieces and inputs."""
    item = "the refund for order 1234 was sent to the wrong account &amp; bank"
    items = [(1, 1, chat(("user", item), ("assistant", "x")))]
    index = contain.build_index([("test", iter(items))], ())
    monkeypatch.setattr(contain, "_INDEX", index)
    monkeypatch.setattr(contain, "_SEEN", contain.defaultdict(int))
    turns = [("system", system)] if system else []
    host = chat(*turns, ("user", "Look: " + item.upper() + " thanks"), ("assistant", "ok"))
    same = chat(*turns, ("user", item), ("assistant", "another answer"))
    for value, how in ((host, "contained"), (same, "input")):
        texts = RecordTexts(json.loads(json.dumps(value)))
        texts.cut = shingle_list(texts.task)
        shared = contain._match(texts.value, (), texts)
        contain._SEEN.clear()
        alone = contain._match(value, ())
        contain._SEEN.clear()
        assert shared == alone
        assert how in {h for h, _i in shared}
