"""``data check`` against leakage a reviewer would call obvious.

Each attack is a disguised copy of a sealed test record planted in train; each must
be found.  Hard negatives (unrelated records, records built from one template with
different content) must stay unmatched.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ftmanifest.cli import main
from ftmanifest.data import leakage
from ftmanifest.data.check import check_data
from ftmanifest.data.leak_report import Split
from ftmanifest.data.leakage import check_leakage
from ftmanifest.data.text import NUM_PERM, normalise, record_text, task_text
from ftmanifest.recordio import iter_records
from tests.data.leakage_test import WORDS, pair, sentence, write_jsonl

SYSTEM = (
    "You are a helpful support agent for Acme Inc. Answer politely and briefly, in the "
    "language of the customer. Never promise a refund before the order has been checked "
    "in the order system; offer a replacement first when the item is in stock. Do not "
    "share internal case notes, and sign every answer with your first name only."
)
USER = (
    "Hi , my order 4417 arrived damaged , and the box was open . I contacted support , "
    "but nobody answered my e-mail ( sent on Monday ) . Can I get a refund , or a "
    "replacement shipped this week ? I would rather not wait another month ."
)
ANSWER = (
    "I am sorry to hear that ! I have opened case 88213 for order 4417 . A replacement "
    "ships tomorrow , and you will get a prepaid label to return the damaged one ."
)


def _detok(text: str) -> str:
    """As a detokeniser writes it: no space before , . ? ! ) and none after (."""
    for p in (",", ".", "?", "!", ")"):
        text = text.replace(" " + p, p)
    return text.replace("( ", "(")


def _sealed(system: str | None = SYSTEM, user: object = USER, answer: object = ANSWER) -> dict:
    turns = [{"role": "system", "content": system}] if system is not None else []
    turns += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return {"messages": turns}


DISGUISES = {
    "system message removed": _sealed(system=None),
    "another system prompt": _sealed(system="You are Qwen, a large language model."),
    "content as text parts": _sealed(
        user=[{"type": "text", "text": USER}], answer=[{"type": "text", "text": ANSWER}]
    ),
    "U+034F after each word": _sealed(
        user=USER.replace(" ", "\u034f "), answer=ANSWER.replace(" ", "\u034f ")
    ),
    "detokenised punctuation": _sealed(user=_detok(USER), answer=_detok(ANSWER)),
}


def _unrelated(rng: random.Random, n: int) -> list[dict]:
    return [_sealed(user=sentence(rng, 40), answer=sentence(rng, 20)) for _ in range(n)]


def _splits(root: Path, fmt: str = "jsonl") -> list[Split]:
    return [
        Split("train", "train", root / f"train.{fmt}"),
        Split("test", "test", root / f"test.{fmt}", sealed=True),
    ]


@pytest.mark.parametrize("name", sorted(DISGUISES))
def test_a_disguised_copy_of_a_sealed_chat_record_is_found(tmp_path: Path, name: str) -> None:
    rng = random.Random(29)
    write_jsonl(tmp_path / "test.jsonl", [_sealed(), *_unrelated(rng, 3)])
    write_jsonl(tmp_path / "train.jsonl", [*_unrelated(rng, 5), DISGUISES[name]])
    report = check_leakage(_splits(tmp_path))
    found = pair(report, "train", "test")
    assert found.exact + found.near == 1, name
    assert found.refused and report.leaking["train"] == {6}
    assert report.without_text == {"train": 0, "test": 0}


def test_structured_content_parts_are_text_not_a_record_without_it() -> None:
    parts = DISGUISES["content as text parts"]
    assert task_text(parts) == task_text(_sealed()) == record_text(_sealed(system=None))
    assert record_text(_sealed()).startswith(SYSTEM)  # the system turn counts for lengths
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    mixed = {"messages": [{"role": "user", "content": [image, {"type": "text", "text": "hi"}]}]}
    assert task_text(mixed) == "hi"  # an image part is not text; its URL is not either


def test_combining_marks_and_default_ignorables_are_folded() -> None:
    plain = "the refund for order 1234"
    assert normalise("t\u0301he re\u0308fund\u20dd for\u0903 order 1234") == plain  # Mn Me Mc
    assert normalise("the\ufe0f refund\u3164 for\u180e order\U000e0100 1234") == plain
    assert normalise("support , please ( now )") == normalise("support, please (now)")


def test_alpaca_records_with_sorted_keys_are_the_same_text(tmp_path: Path) -> None:
    record = {"instruction": "Summarise the text.", "input": USER, "output": ANSWER}
    shuffled = {"output": ANSWER, "input": USER, "instruction": "Summarise the text."}
    assert record_text(record) == record_text(shuffled)
    nested = {"b": {"y": "two", "x": "one"}, "a": ["first", "second"]}
    assert record_text(nested) == record_text(
        {"a": ["first", "second"], "b": {"x": "one", "y": "two"}}
    )
    rng = random.Random(11)
    others = [{"instruction": sentence(rng, 5), "input": sentence(rng, 30), "output": "ok"}]
    write_jsonl(tmp_path / "test.jsonl", [record, *others])
    sorted_copy = json.dumps(record, sort_keys=True)
    unrelated = {"instruction": sentence(rng, 5), "input": sentence(rng, 30), "output": "no"}
    (tmp_path / "train.jsonl").write_text(json.dumps(unrelated) + "\n" + sorted_copy + "\n")
    report = check_leakage(_splits(tmp_path))
    assert pair(report, "train", "test").exact == 1 and not report.ok


MANIFEST = """\
ftmanifest: 1
experiment: {{id: cr}}
model: {{path: model}}
data:
  - {{name: train, role: train, path: train.{ext}}}
  - {{name: test, role: test, path: test.jsonl, sealed: true}}
"""


def _csv_project(tmp_path: Path, body: bytes) -> Path:
    rng = random.Random(5)
    leak = sentence(rng, 30)
    (tmp_path / "test.jsonl").write_text(json.dumps({"text": leak}) + "\n")
    (tmp_path / "train.csv").write_bytes(b"text\n" + body.replace(b"LEAK", leak.encode()))
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(MANIFEST.format(ext="csv"))
    return manifest


@pytest.mark.parametrize(
    "body",
    [
        b"clean one\rLEAK\rclean two\n",  # the leaking row mid-line: was kept
        b"LEAK\rclean one\nclean two\n",  # a clean row after it on its line: was dropped
        b"clean one\r\nclean two\rLEAK\r",  # lone CR at the end of the file
        b'"clean\r one"\rLEAK\r"clean\n two"\n',  # quoted line ends inside cells
    ],
)
def test_write_clean_on_lone_cr_rows_removes_exactly_the_leaking_record(
    tmp_path: Path, body: bytes
) -> None:
    manifest = _csv_project(tmp_path, body)
    out = tmp_path / "clean.csv"
    result = check_data(manifest, write_clean_to=out)
    assert result.clean is not None and result.clean.dropped == 1
    kept = [r.value["text"].replace("\r", "").replace("\n", "") for r in iter_records(out)]
    assert kept == ["clean one", "clean two"]
    # the clean copy itself passes
    manifest.write_text(manifest.read_text().replace("train.csv", "clean.csv"))
    assert check_data(manifest).leakage.ok


def _scattered(base: list[str], sites: list[int], tag: str) -> list[str]:
    words = list(base)
    for i in sites:
        words[i] = f"{tag}{i}"
    return words


def test_lsh_recall_at_the_threshold_is_at_least_99_percent() -> None:
    """The banding formula 1 - (1 - s**r)**b at s = the threshold, from the module's
    constants: 20 bands of 6 rows of 120 permutations give 0.9977 at 0.8."""
    for threshold in (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95):
        bands, rows = leakage.lsh_shape(threshold)
        assert bands * rows == NUM_PERM
        recall = 1 - (1 - threshold**rows) ** bands
        assert recall >= leakage.MIN_RECALL == 0.99, (threshold, bands, rows, recall)
        assert leakage.recall_at(threshold) == pytest.approx(recall)
    assert (leakage.lsh_shape(0.8), round(leakage.recall_at(0.8), 4)) == ((20, 6), 0.9977)


def test_pairs_just_over_the_threshold_become_candidates(tmp_path: Path) -> None:
    """300 pairs at Jaccard 0.815 (four scattered words of 120 changed): at a recall
    of 0.998 per pair, at most a handful may be missed (about 15 were at 0.95)."""
    rng = random.Random(13)
    tests, copies = [], []
    for k in range(300):
        base = [f"{rng.choice(WORDS)}{k}x{i}" for i in range(120)]
        sites = sorted(rng.sample(range(3, 117, 6), 4))
        tests.append({"text": " ".join(base)})
        copies.append({"text": " ".join(_scattered(base, sites, "changed"))})
    write_jsonl(tmp_path / "test.jsonl", tests)
    write_jsonl(tmp_path / "train.jsonl", copies)
    report = check_leakage(_splits(tmp_path), threshold=0.8, examples=300)
    found = pair(report, "train", "test")
    assert {round(m.similarity, 3) for m in found.examples} == {0.815}
    assert found.near >= 298 and found.refused  # 300 * (1 - 0.998): 0.3 expected missed


def _templated(tmp_path: Path, n: int = 100) -> None:
    """``n`` templated test records (J 0.77 with the train copy) before the original
    (record ``n + 1``), and a train copy of the original at J 0.95."""
    rng = random.Random(3)
    base = [f"{rng.choice(WORDS)}{i}" for i in range(120)]
    original = _scattered(base, [60], "orig")
    tests = [
        {"text": " ".join(_scattered(base, [10 + k % 7, 30 + k % 11, 90 + k % 13], f"t{k}w"))}
        for k in range(n)
    ]
    tests.append({"text": " ".join(original)})
    write_jsonl(tmp_path / "test.jsonl", tests)
    write_jsonl(tmp_path / "train.jsonl", [{"text": " ".join(_scattered(original, [75], "c"))}])


def test_a_copy_behind_a_hundred_templated_records_is_checked(tmp_path: Path) -> None:
    _templated(tmp_path)
    report = check_leakage(_splits(tmp_path))
    found = pair(report, "train", "test")
    assert found.near == 1 and found.complete and found.refused
    (match,) = found.examples
    assert match.a.record == 101 and match.similarity >= 0.95


def test_a_capped_search_is_always_a_floor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _templated(tmp_path)
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(MANIFEST.format(ext="jsonl"))
    monkeypatch.setattr(leakage, "MAX_PAIRS", 10)
    report = check_leakage(_splits(tmp_path))
    found = pair(report, "train", "test")
    assert not found.complete and found.refused
    assert any(b.floor for b in found.breaches)
    # within the templated test split, near duplicates are allowed: still marked a floor
    within = pair(report, "test", "test")
    assert not within.complete and not within.refused


def test_a_capped_search_says_floor_in_text_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _templated(tmp_path)
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(MANIFEST.format(ext="jsonl"))
    monkeypatch.setattr(leakage, "MAX_PAIRS", 10)
    assert main(["data", "check", str(manifest)]) == 1
    text = capsys.readouterr().out
    assert "test (itself)" in text and "a floor" in text, text
    assert main(["data", "check", str(manifest), "--format", "json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    pairs = {(p["a"], p["b"]): p for p in payload["pairs"]}
    assert pairs[("test", "test")]["near_complete"] is False
    assert pairs[("test", "test")]["severity"] == "warning"
    assert pairs[("test", "train")]["refused"][-1]["floor"] is True


def test_templated_but_different_records_stay_unmatched(tmp_path: Path) -> None:
    """A false-positive check: one system prompt and one instruction template, every
    question its own; and records unrelated to the sealed one."""
    rng = random.Random(41)

    def filled() -> dict:
        question = "Please classify the following ticket: " + sentence(rng, 25)
        return _sealed(user=question, answer=rng.choice(["billing", "shipping", "other"]))

    write_jsonl(tmp_path / "test.jsonl", [_sealed(), *[filled() for _ in range(100)]])
    write_jsonl(tmp_path / "train.jsonl", [*_unrelated(rng, 50), *[filled() for _ in range(300)]])
    report = check_leakage(_splits(tmp_path))
    found = pair(report, "train", "test")
    assert (found.exact, found.near) == (0, 0) and report.ok
    assert pair(report, "train", "train").near == 0
