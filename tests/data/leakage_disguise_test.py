"""``data check`` against a sealed test item copied into train in disguise.

Each attack plants one disguised copy of a sealed test item among unrelated training
records; each must be found, named as that training record, and dropped by
``--write-clean``.  The control is a realistic 10,000-record chat set (shared system
prompts, greetings and instructions, distinct content) in which nothing may be found.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import random
from pathlib import Path

import pytest

from ftmanifest.data import contain
from ftmanifest.data.clean import write_clean
from ftmanifest.data.leak_report import Split
from ftmanifest.data.leakage import check_leakage
from ftmanifest.data.text import input_pieces, normalise
from ftmanifest.recordio import iter_records
from tests.data.leakage_test import pair, sentence, write_jsonl

ITEM = (
    "The charger's cable frayed after 3 weeks & the <power> light kept blinking, so I "
    'returned it; support said "not covered" and closed my ticket without an answer.'
)
SHORT = "battery died after two days"  # a short input: a label flip moves its Jaccard far
INSTRUCTION = "Classify the sentiment of the following review as positive or negative."


def chat(user: str, answer: str, system: str | None = None) -> dict[str, object]:
    turns = [{"role": "system", "content": system}] if system else []
    return {"messages": [*turns, {"role": "user", "content": user},
                         {"role": "assistant", "content": answer}]}  # fmt: skip


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("'", "&#39;")
        .replace('"', "&quot;")
    )


def _markdown(text: str) -> str:
    words = text.split(" ")
    words[1] = f"`{words[1]}`"
    words[4] = f"_{words[4]}_"
    return "**" + " ".join(words) + "**"


def _lookalikes(text: str) -> str:
    swap = {"a": "а", "e": "е", "o": "ο", "p": "р", "c": "с", "i": "і", "T": "Т", "y": "у"}
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in "weeks")
    text = text.replace("weeks", fullwidth)
    return "  " + "".join(swap.get(c, c) for c in text).upper().replace(" ", " \t ") + "\n"


DISGUISES = {
    "html escaped": chat(_escape(ITEM), "negative"),
    "html escaped twice": chat(_escape(_escape(ITEM)), "negative"),
    "markdown emphasis and code": chat(_markdown(ITEM), "negative"),
    "inside a longer text": chat(
        "Here is something a customer wrote to us last spring, quoted in full: "
        + ITEM
        + " We have since changed our cable supplier.",
        "Noted.",
    ),
    "inside an instruction prompt": chat(f"Instruction: {INSTRUCTION}\n\nInput: {ITEM}", "no"),
    "inside the system prompt": chat("Go on.", "negative", system=f"Context: {ITEM}"),
    "label changed": chat(ITEM, "positive"),
    "short input, label changed": chat(SHORT, "positive"),
    "confusables, fullwidth, case and spaces": chat(_lookalikes(ITEM), "negative"),
}


def _others(rng: random.Random, n: int) -> list[dict[str, object]]:
    return [chat(sentence(rng, 25), rng.choice(["positive", "negative"])) for _ in range(n)]


def _splits(root: Path, fmt: str = "jsonl") -> list[Split]:
    return [
        Split("train", "train", root / f"train.{fmt}", fmt),
        Split("test", "test", root / f"test.{fmt}", fmt, sealed=True),
    ]


@pytest.mark.parametrize("name", sorted(DISGUISES))
def test_a_disguised_copy_of_a_sealed_item_is_found(tmp_path: Path, name: str) -> None:
    rng = random.Random(7)
    write_jsonl(tmp_path / "test.jsonl",
                [chat(ITEM, "negative"), chat(SHORT, "negative"), *_others(rng, 3)])  # fmt: skip
    write_jsonl(tmp_path / "train.jsonl", [*_others(rng, 6), DISGUISES[name], *_others(rng, 2)])
    report = check_leakage(_splits(tmp_path))
    found = pair(report, "train", "test")
    assert found.exact + found.near == 1, name
    assert found.refused and report.leaking["train"] == {7}, name
    assert [m.b.record for m in found.examples] == [7]
    out = tmp_path / "clean.jsonl"
    assert write_clean(tmp_path / "train.jsonl", "jsonl", {7}, out).dropped == 1
    assert check_leakage([Split("train", "train", out), _splits(tmp_path)[1]]).ok


def test_the_undisguised_items_are_what_the_search_holds() -> None:
    """The control beside each disguise: undone, it is the item itself."""
    plain = normalise(ITEM)
    for disguised in (_escape(ITEM), _escape(_escape(ITEM)), _markdown(ITEM), _lookalikes(ITEM)):
        assert normalise(disguised) == plain
    assert normalise("a & amp; b") == normalise(normalise("a & amp; b"))
    label = DISGUISES["label changed"]
    assert input_pieces(label) == input_pieces(chat(ITEM, "negative")) == [ITEM]


def _rows_as_loaders_read_them(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))[1:]


def test_a_leaking_csv_row_ending_in_a_lone_cr_is_found_and_cleaned(tmp_path: Path) -> None:
    rng = random.Random(3)
    with open(tmp_path / "test.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerows([["text", "label"], [ITEM, "negative"], [sentence(rng, 20), "positive"]])
    train = [[sentence(rng, 20), "positive"] for _ in range(4)]
    train.insert(2, [ITEM, "positive"])  # record 3, its label flipped
    with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\r").writerows([["text", "label"], *train])
    assert b"\n" not in (tmp_path / "train.csv").read_bytes()  # one physical line
    seen = _rows_as_loaders_read_them(tmp_path / "train.csv")
    assert seen == train  # the csv module reads five rows, as a loader does
    ours = [list(r.value.values()) for r in iter_records(tmp_path / "train.csv", "csv")]
    assert ours == seen
    if importlib.util.find_spec("pandas") is not None:
        import pandas

        frame = pandas.read_csv(tmp_path / "train.csv", keep_default_na=False)
        assert frame.values.tolist() == seen
    report = check_leakage(_splits(tmp_path, "csv"))
    assert not report.ok and report.leaking["train"] == {3}
    out = tmp_path / "clean.csv"
    assert write_clean(tmp_path / "train.csv", "csv", report.leaking["train"], out).dropped == 1
    assert _rows_as_loaders_read_them(out) == train[:2] + train[3:]


def test_short_items_and_shared_boilerplate_are_not_items(tmp_path: Path) -> None:
    rng = random.Random(5)
    greeting = "Hello there, I have a question about my most recent order with you."
    short = "please reset my password now"  # under MIN_TOKENS
    test = [chat(greeting, "Sure."), chat(short, "Done."), chat(sentence(rng, 20), "ok")]
    train = [chat(f"{greeting} {sentence(rng, 15)}", "ok") for _ in range(contain.COMMON + 1)] + [
        chat(f"Could you {short} and then call me back?", "ok")
    ]
    write_jsonl(tmp_path / "test.jsonl", test)
    write_jsonl(tmp_path / "train.jsonl", train)
    assert check_leakage(_splits(tmp_path)).ok
    # the same greeting in COMMON records is still an item found in each of them
    write_jsonl(tmp_path / "train.jsonl", train[1:])
    report = check_leakage(_splits(tmp_path))
    assert pair(report, "train", "test").near == contain.COMMON
    assert {m.kind for m in pair(report, "train", "test").examples} == {"contained"}


GREETINGS = [
    "Hi!",
    "Hello, thanks for reaching out to Acme support today.",
    "Good morning! I hope you are having a great day so far.",
    "Hey there, I have a quick question for you if you have a moment.",
]
SYSTEMS = [
    "You are a helpful assistant. Answer briefly and politely, and never invent facts.",
    "You are Acme's support agent. Be kind, precise and brief in every answer you give.",
]
CLOSINGS = ["Thanks a lot!", "Thank you so much for your help with this, it is appreciated."]


def _realistic(rng: random.Random, n: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(n):
        content = sentence(rng, rng.randint(6, 40))
        shape = i % 4
        if shape == 0:
            out.append(chat(f"Instruction: {INSTRUCTION}\n\nInput: {content}",
                            rng.choice(["positive", "negative"]), rng.choice(SYSTEMS)))  # fmt: skip
        elif shape == 1:
            turns = [
                {"role": "system", "content": rng.choice(SYSTEMS)},
                {"role": "user", "content": rng.choice(GREETINGS)},
                {"role": "assistant", "content": "Hello! How can I help you today?"},
                {"role": "user", "content": content},
                {"role": "assistant", "content": sentence(rng, 12)},
                {"role": "user", "content": rng.choice(CLOSINGS)},
            ]
            out.append({"messages": turns})
        elif shape == 2:
            out.append({"instruction": INSTRUCTION, "input": content, "output": "negative"})
        else:
            out.append({"prompt": f"{rng.choice(GREETINGS)} {content}", "completion": "ok"})
    return out


def test_no_false_alarm_on_a_realistic_10k_chat_set(tmp_path: Path) -> None:
    rng = random.Random(2026)
    records = _realistic(rng, 10_000)
    write_jsonl(tmp_path / "train.jsonl", records[:9000])
    write_jsonl(tmp_path / "test.jsonl", records[9000:])
    report = check_leakage(_splits(tmp_path), jobs=2)
    cross = pair(report, "test", "train")
    assert (cross.exact, cross.near) == (0, 0), cross.examples[:3]
    assert report.ok and report.leaking["train"] == set()
    # the control's own control: one of its test items pasted into a prompt is found
    planted = chat(f"Instruction: summarise.\n\nInput: {records[9000]['messages'][-2]['content']}",
                   "ok")  # fmt: skip
    write_jsonl(tmp_path / "train.jsonl", [*records[:9000], planted])
    report = check_leakage(_splits(tmp_path), jobs=2)
    assert report.leaking["train"] == {9001} and not report.ok


def test_the_search_does_not_depend_on_the_number_of_processes(tmp_path: Path) -> None:
    rng = random.Random(9)
    test = _realistic(rng, 200)
    train = _realistic(rng, 3000)
    for k in range(0, 200, 7):  # items of every shape, pasted into longer records
        pieces = input_pieces(test[k])
        train.insert(k * 10, chat("Please look at this: " + " ".join(pieces) + " Thanks.", "ok"))
    write_jsonl(tmp_path / "test.jsonl", test)
    write_jsonl(tmp_path / "train.jsonl", train)
    one = check_leakage(_splits(tmp_path), jobs=1)
    two = check_leakage(_splits(tmp_path), jobs=2)
    assert one.leaking == two.leaking and len(one.leaking["train"]) >= 25
    assert [(p.exact, p.near) for p in one.pairs] == [(p.exact, p.near) for p in two.pairs]


def test_csv_text_read_by_the_loader_is_what_contain_reads(tmp_path: Path) -> None:
    text = io.StringIO()
    csv.writer(text, lineterminator="\r\n").writerows([["text"], ["a\rb"], ["c"]])
    (tmp_path / "x.csv").write_text(text.getvalue(), newline="")
    assert [v for _n, _l, v in contain.iter_values(tmp_path / "x.csv", "csv")] == [
        {"text": "a\rb"},
        {"text": "c"},
    ]
