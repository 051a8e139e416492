"""``data check``: categories per split, too few examples, lengths and seq_len."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.data.categories import DEFAULT_MINIMUM, MAX_MINIMUM, minimum
from ftmanifest.data.leak_report import Split
from ftmanifest.data.stats import MAX_LABEL, Histogram, collect, label_of
from ftmanifest.manifest import load_manifest
from tests.conftest import run_cli

GUARD = "  guards: [{kind: per_category, metric: f1, max_drop: 0.2}]\n"
MANIFEST = """\
ftmanifest: 1
experiment:
  id: stats
{guard}model: {{path: model}}
training: {{seq_len: {seq_len}}}
data_checks: {{min_per_category: {minimum}}}
data:
  - {{name: train, role: train, path: train.jsonl}}
  - {{name: eval, role: eval, path: eval.jsonl}}
"""


def records(labels: list[Any], start: int = 0, words: int = 3) -> Iterator[dict[str, Any]]:
    for i, label in enumerate(labels, start):
        text = " ".join(f"w{i}x{k}" for k in range(words))  # distinct: no leakage findings
        yield {"text": text, "label": label}


def write_jsonl(path: Path, rows: Iterator[dict[str, Any]] | list[Any]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def project(
    root: Path, train: list[Any], eval_: list[Any], *, guard: bool, minimum: object = "null"
) -> Path:
    write_jsonl(root / "train.jsonl", records(train))
    write_jsonl(root / "eval.jsonl", records(eval_, start=len(train)))
    manifest = root / "exp.yaml"
    text = MANIFEST.format(guard=GUARD if guard else "", seq_len=64, minimum=minimum)
    manifest.write_text(text, encoding="utf-8")
    return manifest


def check(manifest: Path) -> tuple[int, dict[str, Any]]:
    """``data check --format json`` in this process (the end-to-end runs use ``run_cli``)."""
    import contextlib
    import io

    from ftmanifest.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["data", "check", str(manifest), "--format", "json", "--jobs", "1"])
    return rc, json.loads(out.getvalue())


def rules(payload: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [f for f in payload["findings"] if f["rule"] == rule]


def test_a_train_category_missing_from_eval_refuses_under_a_guard(tmp_path: Path) -> None:
    train = ["spam"] * 60 + ["ham"] * 60 + ["rare"] * 60
    eval_ = ["spam"] * 60 + ["ham"] * 60
    rc, payload = check(project(tmp_path, train, eval_, guard=True))
    missing = rules(payload, "data.category-missing")
    assert rc == 1 and payload["ok"] is False and payload["checks_ok"] is False
    assert len(missing) == 1 and missing[0]["severity"] == "error"
    assert "'rare'" in missing[0]["message"] and missing[0]["extra"] == {"split": "eval"}
    assert payload["categories"]["eval"]["counts"] == {"spam": 60, "ham": 60}
    assert payload["categories"]["train"]["counts"]["rare"] == 60
    text = run_cli("data", "check", str(tmp_path / "exp.yaml"))
    assert text.returncode == 1 and "data.category-missing" in text.stdout
    assert "REFUSED: the findings above hold errors" in text.stdout


def test_without_a_guard_a_missing_category_is_a_warning(tmp_path: Path) -> None:
    train = ["spam"] * 30 + ["ham"] * 30 + ["rare"] * 30
    eval_ = ["spam"] * 30 + ["ham"] * 30 + ["new"] * 30
    rc, payload = check(project(tmp_path, train, eval_, guard=False))
    assert rc == 0 and payload["ok"] is True, payload["findings"]
    (missing,) = rules(payload, "data.category-missing")
    (unseen,) = rules(payload, "data.category-unseen")
    assert missing["severity"] == "warning" and "'rare'" in missing["message"]
    assert unseen["severity"] == "warning" and "'new'" in unseen["message"]


def test_too_few_examples_per_category(tmp_path: Path) -> None:
    # the guard's max_drop 0.2 asks for 49 per category (1.92 / 0.04)
    train = ["a"] * 60 + ["b"] * 60
    rc, payload = check(project(tmp_path, train, ["a"] * 49 + ["b"] * 48, guard=True))
    (few,) = rules(payload, "data.too-few")
    assert rc == 0 and few["severity"] == "warning"
    assert "'b (48)'" in few["message"] and "'a" not in few["message"]
    assert payload["min_per_category"]["eval"]["n"] == 49
    # data_checks.min_per_category wins over the guard
    rc, payload = check(project(tmp_path, train, ["a"] * 5 + ["b"] * 4, guard=True, minimum=5))
    (few,) = rules(payload, "data.too-few")
    assert "'b (4)'" in few["message"] and payload["min_per_category"]["eval"]["n"] == 5


def test_minimum_rule(tmp_path: Path) -> None:
    manifest = project(tmp_path, ["a"], ["a"], guard=False)
    assert minimum(load_manifest(manifest).manifest, "eval")[0] == DEFAULT_MINIMUM
    for drop, n in ((0.2, 49), (0.05, 769), (0.1, 193), (0.0, MAX_MINIMUM)):
        text = manifest.read_text().replace(
            "  id: stats\n", f"  id: stats\n{GUARD.replace('0.2', str(drop))}"
        )
        manifest.write_text(text)
        assert minimum(load_manifest(manifest).manifest, "eval")[0] == n
        manifest.write_text(MANIFEST.format(guard="", seq_len=64, minimum="null"))


def test_unlabelled_records_and_no_labels_at_all(tmp_path: Path) -> None:
    rc, payload = check(project(tmp_path, ["a"] * 30 + [None] * 3, ["a"] * 30, guard=False))
    (unlabelled,) = rules(payload, "data.unlabelled")
    assert "3 records" in unlabelled["message"] and payload["categories"]["train"]["unlabelled"]
    rc, payload = check(project(tmp_path, [None] * 5, [None] * 5, guard=True))
    assert rc == 0 and not [f for f in payload["findings"] if "categor" in f["rule"]]


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ftmanifest.examples.tiny import build_tokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    build_tokenizer(folder, ["alpha beta gamma delta epsilon zeta eta theta"])
    return folder


def test_over_length_records_are_counted_with_the_pinned_tokenizer(
    tokenizer_folder: Path, tmp_path: Path
) -> None:
    import shutil

    shutil.copytree(tokenizer_folder, tmp_path / "model")
    # a word-level tokenizer: a text record is its words plus BOS and EOS
    lengths = [3, 12, 5, 30, 8, 9, 40, 1]  # +1 unknown word +2: 6 15 8 33 11 12 43 4
    rows = [{"text": " ".join(["alpha"] * n + [f"unknown{i}"]), "label": "x"}
            for i, n in enumerate(lengths)]  # fmt: skip
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "eval.jsonl", [{"text": "beta gamma", "label": "x"}])
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(MANIFEST.format(guard="", seq_len=10, minimum=0))
    rc, payload = check(manifest)
    (over,) = rules(payload, "data.over-length")
    train = payload["lengths"]["train"]
    assert rc == 0 and over["severity"] == "warning"
    assert train["over_seq_len"] == 5 and payload["lengths"]["eval"]["over_seq_len"] == 0
    assert train["tokens"]["max"] == 43 and train["tokens"]["min"] == 4  # 40+1 words, +2
    assert train["longest"][:2] == [{"line": 7, "tokens": 43}, {"line": 4, "tokens": 33}]
    assert "5 of 8 records" in over["message"] and "line 7 (43 tokens)" in over["message"]
    assert payload["tokenizer"]["loaded"] is True
    assert payload["lengths"]["train"]["chars"]["max"] == len(rows[6]["text"])
    text = run_cli("data", "check", str(manifest)).stdout
    assert "over seq_len 10" in text and "data.over-length" in text


def test_without_the_tokenizer_over_length_cannot_be_judged(tmp_path: Path) -> None:
    rc, payload = check(project(tmp_path, ["a"] * 20, ["a"] * 20, guard=False))
    (unjudged,) = rules(payload, "data.length-unjudged")
    assert unjudged["severity"] == "warning" and "not here" in unjudged["message"]
    assert payload["tokenizer"]["loaded"] is False
    assert payload["lengths"]["train"]["over_seq_len"] is None
    (tmp_path / "model").mkdir()  # a folder, but no tokenizer in it
    rc, payload = check(tmp_path / "exp.yaml")
    (unjudged,) = rules(payload, "data.length-unjudged")
    assert "no tokenizer loads" in unjudged["message"]
    text = run_cli("data", "check", str(tmp_path / "exp.yaml")).stdout
    assert "tokens not counted: no tokenizer loads" in text


def test_labels_of_odd_types() -> None:
    assert label_of({"label": "a"}) == "a" and label_of({"category": "c"}) == "c"
    assert label_of({"label": 1}) == label_of({"label": "1"}) == "1"
    assert label_of({"label": {"b": 1, "a": [True, None]}}) == '{"a": [true, null], "b": 1}'
    assert label_of({"label": None, "category": "c"}) is None  # label is the key, null: none
    assert label_of({"topic": "t"}, "topic") == "t" and label_of("a line") is None
    assert len(label_of({"label": list(range(1000))}) or "") == MAX_LABEL


def test_histogram_is_exact_small_and_close_large() -> None:
    h = Histogram()
    for v in range(1, 1001):
        h.add(v)
    assert (h.percentile(0.5), h.percentile(0.9), h.min, h.max) == (500, 900, 1, 1000)
    big = Histogram()
    values = [1_000_003 * k + 7 for k in range(1, 20_001)]
    for v in values:
        big.add(v)
    p50 = big.percentile(0.5)
    assert p50 is not None and abs(p50 - values[9_999]) / values[9_999] < 0.002
    assert len(big.buckets) < 512 * 15  # bounded: at most 512 buckets per doubling


@pytest.fixture(scope="module")
def loaded_tokenizer(tokenizer_folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_folder), local_files_only=True)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)  # fmt: skip
RECORD = st.one_of(
    JSON,
    st.fixed_dictionaries({"label": JSON, "text": JSON}),
    st.fixed_dictionaries({"category": JSON, "messages": st.lists(st.dictionaries(
        st.sampled_from(["role", "content"]), JSON, max_size=2), max_size=3)}),
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(RECORD, max_size=8), tokens=st.booleans())
def test_statistics_never_crash_on_arbitrary_json_records(
    loaded_tokenizer: Any, rows: list[Any], tokens: bool
) -> None:
    tokenizer = loaded_tokenizer if tokens else None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.jsonl"
        write_jsonl(path, rows)
        stats = collect(Split("train", "train", path, "jsonl"), tokenizer=tokenizer, seq_len=4)
    assert stats.records == len(rows)
    assert sum(stats.categories.values()) + stats.unlabelled == len(rows)
    assert stats.chars.count == len(rows)
    if tokenizer is not None:
        assert stats.tokens is not None and stats.tokens.count + stats.untokenized == len(rows)
        assert stats.over == sum(1 for n in stats.tokens.buckets.elements() if n > 4)
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("label"), (int, list, dict)):
            assert label_of(row) in stats.categories


@pytest.mark.parametrize("label", ["label", "topic"])
def test_the_label_key_comes_from_the_manifest(tmp_path: Path, label: str) -> None:
    write_jsonl(tmp_path / "train.jsonl", [{"text": "a b c", label: "x", "label": "y"}])
    write_jsonl(tmp_path / "eval.jsonl", [{"text": "d e f", label: "x", "label": "y"}])
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(MANIFEST.format(guard="", seq_len=64, minimum=0).replace(
        "min_per_category: 0", f"min_per_category: 0, label: {label}"))  # fmt: skip
    rc, payload = check(manifest)
    assert payload["categories"]["train"]["counts"] == {"x" if label == "topic" else "y": 1}


def test_a_guard_on_one_split_makes_only_that_split_an_error(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", records(["a"] * 5 + ["b"] * 5))
    write_jsonl(tmp_path / "eval.jsonl", records(["a"] * 5, start=10))
    write_jsonl(tmp_path / "test.jsonl", records(["a"] * 5, start=20))
    manifest = tmp_path / "exp.yaml"
    text = MANIFEST.format(guard=GUARD.replace("max_drop", "split: eval, max_drop"),
                           seq_len=64, minimum=0)  # fmt: skip
    manifest.write_text(text + "  - {name: test, role: test, path: test.jsonl}\n")
    rc, payload = check(manifest)
    severity = {f["extra"]["split"]: f["severity"] for f in rules(payload, "data.category-missing")}
    assert rc == 1 and severity == {"eval": "error", "test": "warning"}


def test_distinct_categories_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ftmanifest.data import stats as stats_mod
    from ftmanifest.data.categories import OTHER, Categories, category_findings

    monkeypatch.setattr(stats_mod, "MAX_CATEGORIES", 3)
    path = tmp_path / "train.jsonl"
    write_jsonl(path, records([f"free text {i}" for i in range(10)] + ["free text 0"]))
    stats = collect(Split("train", "train", path, "jsonl"))
    assert len(stats.categories) == 4 and stats.categories[OTHER] == 7
    assert stats.categories["free text 0"] == 2
    manifest = load_manifest(project(tmp_path, ["a"], ["a"], guard=False)).manifest
    found = category_findings([Categories("train", "train", str(path), stats.categories)], manifest)
    assert [f.rule for f in found] == ["data.too-many-categories"]


def test_categories_a_guard_names_must_be_in_its_split(tmp_path: Path) -> None:
    guard = GUARD.replace("max_drop", "categories: [a, zzz], max_drop")
    manifest = project(tmp_path, ["a"] * 5, ["a"] * 5, guard=True, minimum=0)
    manifest.write_text(manifest.read_text().replace(GUARD, guard))
    rc, payload = check(manifest)
    (missing,) = rules(payload, "data.category-missing")
    assert rc == 1 and missing["severity"] == "error" and "'zzz'" in missing["message"]


def test_labels_cannot_write_to_the_terminal(tmp_path: Path) -> None:
    hostile = "\x1b[2J\x1b]0;owned\x07"
    manifest = project(tmp_path, [hostile] * 3, ["b"] * 3, guard=False, minimum=0)
    out = run_cli("data", "check", str(manifest)).stdout
    assert "\x1b" not in out and "\x07" not in out and "\\x1b[2J" in out


def test_only_the_pinned_tokenizer_is_used(tokenizer_folder: Path, tmp_path: Path) -> None:
    import shutil

    from ftmanifest.hashing.files import hash_file

    shutil.copytree(tokenizer_folder, tmp_path / "model")
    manifest = project(tmp_path, ["a"] * 3, ["a"] * 3, guard=False, minimum=0)
    model = tmp_path / "model"
    pins = "".join(
        f"    - {{path: {p.name}, digest: '{hash_file(p).digest}'}}\n"
        for p in sorted(model.iterdir())
    )
    pinned = manifest.read_text().replace("model: {path: model}\n", f"model:\n  path: model\n"
                                          f"  files:\n{pins}")  # fmt: skip
    manifest.write_text(pinned)
    rc, payload = check(manifest)
    assert payload["tokenizer"]["loaded"] is True, payload["tokenizer"]
    config = model / "tokenizer_config.json"
    config.write_text(config.read_text().replace("{", '{"model_max_length": 7, ', 1))
    rc, payload = check(manifest)
    assert payload["tokenizer"]["loaded"] is False
    assert "tokenizer_config.json" in payload["tokenizer"]["source"]
    assert "differs from its pin" in payload["tokenizer"]["source"]
    (unjudged,) = rules(payload, "data.length-unjudged")
    assert "differs from its pin" in unjudged["message"]


def test_a_guard_naming_a_category_eval_lacks_refuses_with_an_unlabelled_train_split(
    tmp_path: Path,
) -> None:
    """A typo in a guard's categories is an error even when train carries no labels
    (a language-model corpus); control: the names spelled right pass."""
    write_jsonl(tmp_path / "train.jsonl", [{"text": f"plain text {i}"} for i in range(40)])
    write_jsonl(tmp_path / "eval.jsonl", records(["spam"] * 30 + ["ham"] * 30, start=40))
    manifest = tmp_path / "exp.yaml"
    guard = (
        "  guards: [{kind: per_category, metric: f1, max_drop: 0.2, categories: [spam, CATS]}]\n"  # noqa: E501
    )
    for cats, refused in (("hamm", True), ("ham", False)):
        text = MANIFEST.format(guard=guard.replace("CATS", cats), seq_len=64, minimum="null")
        manifest.write_text(text, encoding="utf-8")
        rc, payload = check(manifest)
        missing = [f for f in rules(payload, "data.category-missing") if f["severity"] == "error"]
        assert (rc == 1, bool(missing)) == (refused, refused), payload["findings"]
        if refused:
            assert "'hamm'" in missing[0]["message"]
