"""``ftmanifest data sample``: seeded records of every category, rendered with a real
tokenizer (trained with ``tokenizers``) and its chat template."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.cli import main
from ftmanifest.data import sample as s
from ftmanifest.data.leak_report import Split

CATS = ("billing", "shipping", "returns")
TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|> {{ m.content }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
MANIFEST = """\
ftmanifest: 1
experiment: {{id: sample}}
model: {{path: model}}
seeds: {{data_order: 7}}
data:
  - {{name: train, role: train, path: train.jsonl}}
  - {{name: eval, role: eval, path: eval.jsonl}}
  - {{name: notes, role: other, path: notes.txt}}
training: {{seq_len: {seq_len}, loss_on: {loss_on}}}
"""


def chat(i: int, cat: str | None, split: str = "train") -> dict[str, Any]:
    rec: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": f"question {split} {i} about {cat or 'nothing'}"},
            {"role": "assistant", "content": f"answer {cat or 'none'} {i}"},
        ]
    }
    if cat is not None:
        rec["label"] = cat
    return rec


def write_jsonl(path: Path, records: list[Any]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def build_tok(folder: Path, *, chat_template: bool = True, extra: str = "") -> None:
    from ftmanifest.examples.tiny import build_tokenizer

    words = ["question", "answer", "about", "nothing", "none", "train", "eval", "is", "my"]
    corpus = [" ".join(words + list(CATS) + [str(i) for i in range(100)]) + " " + extra]
    tok = build_tokenizer(folder, corpus)
    if chat_template:
        tok.add_special_tokens(
            {"additional_special_tokens": ["<|user|>", "<|assistant|>", "<|end|>"]}
        )
        tok.chat_template = TEMPLATE
    tok.save_pretrained(str(folder))


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tok") / "model"
    build_tok(folder)
    return folder


def project(
    root: Path,
    tok_dir: Path | None,
    *,
    train: list[Any] | None = None,
    seq_len: int = 64,
    loss_on: str = "completion",
) -> Path:
    if tok_dir is not None:
        shutil.copytree(tok_dir, root / "model")
    if train is None:
        train = [chat(i, CATS[i % 3]) for i in range(60)] + [chat(60, None), chat(61, None)]
    write_jsonl(root / "train.jsonl", train)
    write_jsonl(root / "eval.jsonl", [chat(i, CATS[i % 3], "eval") for i in range(12)])
    (root / "notes.txt").write_text("not sampled\n")
    manifest = root / "exp.yaml"
    manifest.write_text(MANIFEST.format(seq_len=seq_len, loss_on=loss_on))
    return manifest


def sample(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["data", "sample", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = sample(capsys, *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def chosen(payload: dict[str, Any]) -> dict[tuple[str, Any], list[int]]:
    return {
        (sp["name"], c["category"]): [e["record"] for e in c["examples"]]
        for sp in payload["splits"]
        for c in sp["categories"]
    }


def test_the_chat_template_of_the_pinned_tokenizer_is_applied(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = project(tmp_path, tok_dir)
    payload = as_json(capsys, str(m), "--per-category", "2", "--split", "train")
    assert payload["rendered"] and payload["tokenizer"]["chat_template"]
    ex = payload["splits"][0]["categories"][0]["examples"][0]
    n, cat = ex["record"] - 1, payload["splits"][0]["categories"][0]["category"]
    r = ex["rendered"]
    # the template's own markers around the right message texts, the prompt ending
    # with the generation prompt, the answer (and its end marker) as the completion
    assert r["prompt_text"] == f"<|user|> question train {n} about {cat} <|end|> <|assistant|>"
    assert r["completion_text"] == f"answer {cat} {n} <|end|>"
    assert r["loss_text"] == r["completion_text"]  # loss_on: completion
    assert [t["token"] for t in r["tokens"] if t["loss"]] == ["answer", cat, str(n), "<|end|>"]
    assert ex["target"] == {"field": "messages[1] (assistant)", "text": f"answer {cat} {n}"}
    code, out, _ = sample(capsys, str(m), "--per-category", "2", "--split", "train")
    assert code == 0
    first, second = out.splitlines()[:2]
    assert first.startswith(
        "computed by ftmanifest's preprocessing (not the trainer's batches): "
        "preflight's default recipe"
    )
    assert second.startswith("rendered with tokenizer ")
    assert f'input:    "<|user|> question train {n} about {cat} <|end|> <|assistant|>"' in out
    assert f"| [answer] [{cat}] [{n}] [<|end|>]" in out


def test_n_per_category_and_every_category_including_none(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payload = as_json(capsys, str(project(tmp_path, tok_dir)), "--per-category", "3")
    assert [sp["name"] for sp in payload["splits"]] == ["train", "eval"]  # not role: other
    cats = {sp["name"]: {c["category"]: c for c in sp["categories"]} for sp in payload["splits"]}
    assert set(cats["train"]) == {*CATS, None}
    assert set(cats["eval"]) == set(CATS)
    assert cats["train"]["billing"]["records"] == 20
    assert cats["train"][None]["records"] == 2 and len(cats["train"][None]["examples"]) == 2
    for split in cats.values():
        for cat, c in split.items():
            if cat is not None:
                assert len(c["examples"]) == 3
                assert all(e["target"]["text"].startswith(f"answer {cat}") for e in c["examples"])
    _, out, _ = sample(capsys, str(project(tmp_path / "x", tok_dir)), "--per-category", "1")
    assert "-- (no category): 2 records, 1 shown --" in out


def test_same_seed_same_records_other_seed_other_records(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = project(tmp_path, tok_dir)
    first = sample(capsys, str(m), "--per-category", "3")
    assert sample(capsys, str(m), "--per-category", "3") == first
    default = chosen(as_json(capsys, str(m), "--per-category", "3"))
    assert chosen(as_json(capsys, str(m), "--per-category", "3", "--seed", "7")) == default
    other = chosen(as_json(capsys, str(m), "--per-category", "3", "--seed", "8"))
    assert other != default and other.keys() == default.keys()
    assert as_json(capsys, str(m), "--per-category", "1")["seed_from"] == "seeds.data_order"


def test_the_choice_ignores_other_splits_and_other_categories(tmp_path: Path) -> None:
    """Keyed by (seed, split, record number): editing eval, or appending records of
    another category, leaves train's choice for billing as it was."""
    recs = [chat(i, CATS[i % 3]) for i in range(60)]
    write_jsonl(tmp_path / "a.jsonl", recs)
    write_jsonl(tmp_path / "b.jsonl", recs + [chat(i, "shipping") for i in range(60, 200)])
    write_jsonl(tmp_path / "e.jsonl", [chat(1, "billing", "eval")])
    a = s.choose([Split("train", "train", tmp_path / "a.jsonl")], 4, seed=3)
    b = s.choose(
        [
            Split("eval", "eval", tmp_path / "e.jsonl"),
            Split("train", "train", tmp_path / "b.jsonl"),
        ],
        4,
        seed=3,
    )
    assert [p.number for p in a[0].picks["billing"]] == [p.number for p in b[1].picks["billing"]]
    # not merely the first records of the file: a seeded choice spread over it
    assert [p.number for p in a[0].picks["billing"]] != [1, 4, 7, 10]


def test_split_filter(tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = as_json(capsys, str(project(tmp_path, tok_dir)), "--per-category", "1",
                      "--split", "eval")  # fmt: skip
    assert [sp["name"] for sp in payload["splits"]] == ["eval"]


def test_unknown_split_is_exit_2_naming_the_splits(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = project(tmp_path, tok_dir)
    code, out, err = sample(capsys, str(m), "--per-category", "1", "--split", "tset")
    assert code == 2 and out == ""
    assert "'tset'" in err and "one of: train, eval" in err and "Traceback" not in err
    code, _, err = sample(capsys, str(m), "--per-category", "1", "--split", "notes")
    assert code == 2 and "one of: train, eval" in err  # role: other is not sampled


@pytest.mark.parametrize("argv", [["--per-category", "0"], ["--per-category", "-1"],
                                  ["--per-category", "1001"],
                                  ["--per-category", "1", "--seed", "-2"]])  # fmt: skip
def test_bad_numbers_are_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, _, err = sample(capsys, str(project(tmp_path, None)), *argv)
    assert code == 2 and "Traceback" not in err


def test_prompt_completion_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "tok"
    build_tok(folder, chat_template=False)
    recs = [{"prompt": f"question {i} about", "completion": f"answer {i}",
             "category": CATS[i % 3]} for i in range(9)]  # fmt: skip
    m = project(tmp_path, folder, train=recs)
    payload = as_json(capsys, str(m), "--per-category", "1", "--split", "train")
    assert not payload["tokenizer"]["chat_template"]
    ex = payload["splits"][0]["categories"][0]["examples"][0]
    n = ex["record"] - 1
    assert ex["rendered"]["prompt_text"] == f"<s> question {n} about"
    assert ex["rendered"]["completion_text"] == f"answer {n} </s>"
    assert ex["target"] == {"field": "completion", "text": f"answer {n}"}
    assert [c["category"] for c in payload["splits"][0]["categories"]] == sorted(CATS)


def test_loss_on_all_and_truncation_that_cuts_the_target(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = project(tmp_path, tok_dir, seq_len=9, loss_on="all")
    payload = as_json(capsys, str(m), "--per-category", "1", "--split", "train")
    r = payload["splits"][0]["categories"][0]["examples"][0]["rendered"]
    assert r["kept_tokens"] == 9 and r["token_count"] == 12
    assert r["truncated"] and r["target_cut"] and not r["target_lost"]
    assert r["loss_tokens"] == 8  # every token but the first
    _, out, _ = sample(capsys, str(m), "--per-category", "1", "--split", "train")
    assert "TRUNCATED at seq_len 9: 12 tokens; the target loses 3 of its 4 tokens" in out
    m = project(tmp_path / "lost", tok_dir, seq_len=5)
    _, out, _ = sample(capsys, str(m), "--per-category", "1", "--split", "train")
    assert "the target is cut off entirely" in out


def test_without_the_tokenizer_it_says_so_and_shows_raw_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = project(tmp_path, None)  # no model folder here
    code, out, _ = sample(capsys, str(m), "--per-category", "1", "--split", "train")
    assert code == 0
    assert out.splitlines()[1].startswith(
        "NOT RENDERED: the pinned tokenizer is not available offline"
    )
    assert "<|user|>" not in out and "tokens:" not in out
    assert 'messages[0] user: "question train' in out
    payload = as_json(capsys, str(m), "--per-category", "1")
    assert payload["rendered"] is False and payload["tokenizer"]["reason"]
    assert all(e["rendered"] is None for sp in payload["splits"] for c in sp["categories"]
               for e in c["examples"])  # fmt: skip


def test_a_tokenizer_that_differs_from_its_pin_is_not_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "model"
    build_tok(folder)
    m = project(tmp_path, None)
    from ftmanifest.hashing.files import hash_file

    pins = {p.name: hash_file(p, use_cache=False).digest for p in folder.iterdir()}
    m.write_text(m.read_text().replace("model: {path: model}", "model: {path: model, files: ["
        + ", ".join(f"{{path: {n}, digest: '{d}'}}" for n, d in pins.items()) + "]}"))  # fmt: skip
    code, out, _ = sample(capsys, str(m), "--per-category", "1", "--split", "eval")
    assert code == 0 and out.splitlines()[1].startswith("rendered with tokenizer")
    with (folder / "tokenizer.json").open("a") as fh:
        fh.write(" ")
    code, out, _ = sample(capsys, str(m), "--per-category", "1", "--split", "eval")
    assert code == 0
    assert out.splitlines()[1].startswith("NOT RENDERED")
    assert "tokenizer.json differs from its pin" in out


def test_html_is_self_contained_and_escapes_a_script_in_a_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = '<script>alert("x")</script> <img src=http://e.x/a>'
    build_tok(tmp_path / "tok", extra=evil)  # the tokenizer knows the words: they render
    hostile = chat(0, "billing")
    hostile["messages"][0]["content"] = evil
    hostile["label"] = "<b>bold</b>"
    recs = [hostile] + [chat(i, CATS[i % 3]) for i in range(1, 9)]
    m = project(tmp_path, tmp_path / "tok", train=recs)
    page = tmp_path / "sample.html"
    code, out, _ = sample(capsys, str(m), "--per-category", "9", "--out", str(page))
    assert code == 0 and f"written: {page}" in out
    html = page.read_text("utf-8")
    assert "<script" not in html.lower() and "&lt;script&gt;" in html
    assert "<img" not in html and "<b>bold" not in html and "&lt;b&gt;bold" in html
    tags, attrs = page_structure(html)
    assert tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4",
                    "p", "span", "section", "table", "tr", "th", "td", "pre", "small", "b",
                    "details", "summary"}  # fmt: skip
    assert not {"src", "href", "action", "srcset", "data"} & {a for a, _v in attrs}
    assert not [v for _a, v in attrs if "http" in v.lower() and "equiv" not in v.lower()]
    # the record's URL is there only as escaped text, never anywhere else
    assert "http" not in html.replace("http-equiv", "").replace("src=http://e.x/a", "")
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert '<span class="tok loss"' in html  # loss highlighted
    assert "&lt;|user|&gt; &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".sample")] == []


def page_structure(page: str) -> tuple[set[str], list[tuple[str, str]]]:
    from html.parser import HTMLParser

    tags: set[str] = set()
    attrs: list[tuple[str, str]] = []

    class Walk(HTMLParser):
        def handle_starttag(self, tag: str, found: list[tuple[str, str | None]]) -> None:
            tags.add(tag)
            attrs.extend((a, v or "") for a, v in found)

    Walk().feed(page)
    return tags, attrs


def test_html_never_overwrites_an_input(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = project(tmp_path, tok_dir)
    before = (tmp_path / "train.jsonl").read_bytes()
    for target in (m, tmp_path / "train.jsonl", tmp_path / "notes.txt"):
        code, _, err = sample(capsys, str(m), "--per-category", "1", "--out", str(target))
        assert code == 2 and "overwrite an input" in err
    assert (tmp_path / "train.jsonl").read_bytes() == before
    code, _, err = sample(capsys, str(m), "--per-category", "1", "--out",
                          str(tmp_path / "model" / "sample.html"))  # fmt: skip
    assert code == 2 and "model's folder" in err
    assert not (tmp_path / "model" / "sample.html").exists()


def test_html_never_adds_a_file_to_a_pinned_data_folder(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A page written into a data entry that is a folder would change its tree digest."""
    m = project(tmp_path, tok_dir)
    (tmp_path / "raw" / "part").mkdir(parents=True)
    (tmp_path / "raw" / "part" / "a.txt").write_text("x\n")
    text = m.read_text().replace("training:", "  - {name: raw, role: other, path: raw}\ntraining:")
    m.write_text(text)
    target = tmp_path / "raw" / "part" / "sample.html"
    code, _, err = sample(capsys, str(m), "--per-category", "1", "--out", str(target))
    assert code == 2 and "pinned" in err and "raw" in err
    assert not target.exists()


def test_a_chat_template_that_raises_is_exit_1_naming_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoTokenizer

    build_tok(tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(tmp_path / "tok")
    tok.chat_template = "{{ raise_exception('roles must alternate user/assistant') }}"
    tok.save_pretrained(str(tmp_path / "tok"))
    m = project(tmp_path, tmp_path / "tok")
    code, out, _ = sample(capsys, str(m), "--per-category", "1", "--split", "eval")
    assert code == 1 and "CANNOT FORMAT" in out and "roles must alternate" in out


def test_control_characters_in_a_record_are_made_visible(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = {"prompt": "red \x1b[31m\nline\u202e", "completion": " two\tthings ", "label": "a\x1b"}
    m = project(tmp_path, None, train=[rec])
    code, out, _ = sample(capsys, str(m), "--per-category", "1", "--split", "train")
    assert code == 0 and "\x1b" not in out and "\u202e" not in out
    assert r'"red \x1b[31m\nline\u202e"' in out and r'" two\tthings "' in out


def test_a_record_training_cannot_format_is_exit_1(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = project(tmp_path, tok_dir, train=[{"question": "no known shape", "label": "billing"}])
    code, out, _ = sample(capsys, str(m), "--per-category", "1", "--split", "train")
    assert code == 1 and "CANNOT FORMAT" in out and "REFUSED" in out


def test_a_label_key_that_is_free_text_is_refused_not_held_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ftmanifest.errors import InputError

    monkeypatch.setattr(s, "MAX_CATEGORIES", 5)
    write_jsonl(tmp_path / "t.jsonl", [{"text": f"t{i}", "label": f"l{i}"} for i in range(9)])
    with pytest.raises(InputError, match="more than 5 categories"):
        s.choose([Split("train", "train", tmp_path / "t.jsonl")], 1, seed=0)


def test_the_manifest_label_and_target_keys(tmp_path: Path) -> None:
    rec = {"text": "x", "kind": 3, "gold": {"a": 1}, "label": "ignored"}
    assert s.target_of(rec, "gold", "kind") == ("gold", '{"a": 1}')
    assert s.target_of(rec, None, "kind") == ("kind", "3")
    write_jsonl(tmp_path / "t.jsonl", [rec, {"text": "y"}])
    (got,) = s.choose([Split("train", "train", tmp_path / "t.jsonl")], 1, seed=0, label="kind")
    assert set(got.picks) == {"3", None}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything")
def test_an_unreadable_split_is_exit_2(
    tmp_path: Path, tok_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = project(tmp_path, tok_dir)
    (tmp_path / "eval.jsonl").chmod(0)
    code, _, err = sample(capsys, str(m), "--per-category", "1")
    assert code == 2 and "Traceback" not in err
