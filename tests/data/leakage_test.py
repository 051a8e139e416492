"""``ftmanifest data check``: planted exact and near duplicates between splits."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftmanifest.data.check import check_data
from ftmanifest.data.clean import write_clean
from ftmanifest.data.leak_report import Split
from ftmanifest.data.leakage import check_leakage
from ftmanifest.data.text import normalise, record_text
from ftmanifest.errors import InputError, UsageError
from tests.conftest import run_cli

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()


def sentence(rng: random.Random, n: int = 100) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(n))


def chat(user: str, answer: str = "ok") -> dict[str, object]:
    return {
        "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    }


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def change_words(text: str, n: int, rng: random.Random) -> str:
    words = text.split(" ")
    for i in rng.sample(range(len(words)), n):
        words[i] = "changed" + str(i)
    return " ".join(words)


MANIFEST = """\
ftmanifest: 1
experiment: {{id: leakage}}
model: {{path: model}}
data:
  - {{name: train, role: train, path: train.{ext}}}
  - {{name: eval, role: eval, path: eval.{ext}}}
  - {{name: test, role: test, path: test.{ext}, sealed: {sealed}}}
"""


@pytest.fixture
def project(tmp_path: Path) -> dict[str, object]:
    """200 distinct training records; eval and test plant copies and near copies of some."""
    rng = random.Random(17)
    texts = [sentence(rng) for _ in range(200)]
    train = [chat(t) for t in texts]
    eval_ = [
        chat(texts[3]),  # exact
        chat("  " + texts[4].upper().replace(" ", "\t ") + " "),  # case and whitespace
        chat(texts[5].replace("alpha", "ａｌｐｈａ")),  # full-width letters: NFKC
        chat(change_words(texts[6], 1, rng)),  # near: one word of 100
        chat(sentence(rng)),  # unrelated
    ]
    test = [chat(change_words(texts[7], 2, rng)), chat(sentence(rng))]
    write_jsonl(tmp_path / "train.jsonl", train)
    write_jsonl(tmp_path / "eval.jsonl", eval_)
    write_jsonl(tmp_path / "test.jsonl", test)
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(MANIFEST.format(ext="jsonl", sealed="true"))
    return {"root": tmp_path, "manifest": manifest, "texts": texts, "rng": rng}


def splits(root: Path, ext: str = "jsonl", sealed: bool = True) -> list[Split]:
    return [
        Split("train", "train", root / f"train.{ext}"),
        Split("eval", "eval", root / f"eval.{ext}"),
        Split("test", "test", root / f"test.{ext}", sealed=sealed),
    ]


def pair(report, a: str, b: str):  # type: ignore[no-untyped-def]
    return next(p for p in report.pairs if {p.a, p.b} == {a, b} and (a == b) == (p.a == p.b))


def test_exact_duplicates_after_normalisation_are_found(project: dict[str, object]) -> None:
    report = check_leakage(splits(project["root"]))  # type: ignore[arg-type]
    train_eval = pair(report, "train", "eval")
    assert train_eval.exact == 3  # plain copy, case/whitespace, full-width
    assert train_eval.near == 1
    exact = sorted(m.b.record for m in train_eval.examples if m.kind == "exact")
    assert exact == [4, 5, 6]
    assert report.leaking["train"] == {4, 5, 6, 7, 8}


def test_near_duplicate_of_sealed_test_refuses(project: dict[str, object]) -> None:
    report = check_leakage(splits(project["root"]))  # type: ignore[arg-type]
    train_test = pair(report, "train", "test")
    assert (train_test.exact, train_test.near, train_test.refused) == (0, 1, True)
    (match,) = train_test.examples
    assert match.kind == "near" and 0.8 <= match.similarity < 1
    assert (match.b.record, match.b.line) == (8, 8)
    assert not pair(report, "train", "eval").refused  # eval is not sealed: a warning
    assert not report.ok
    result = run_cli("data", "check", str(project["manifest"]))
    assert result.returncode == 1, result.stderr
    assert "REFUSED" in result.stdout and "train vs test" in result.stdout


def test_unsealed_near_duplicate_is_a_warning(project: dict[str, object]) -> None:
    report = check_leakage(splits(project["root"], sealed=False))  # type: ignore[arg-type]
    assert report.ok and pair(report, "train", "test").near == 1


def test_exact_train_test_duplicate_refuses_even_unsealed(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", [{"text": "the same words here"}, {"text": "other"}])
    write_jsonl(tmp_path / "eval.jsonl", [{"text": "unrelated"}])
    write_jsonl(tmp_path / "test.jsonl", [{"text": "The  same WORDS here"}])
    report = check_leakage(splits(tmp_path, sealed=False))
    assert pair(report, "train", "test").exact == 1 and not report.ok


def test_invisible_characters_do_not_hide_a_copy(tmp_path: Path) -> None:
    """A test record copied into train with zero-width spaces, a soft hyphen and a
    bidi mark inside its words is the same text to a reader: an exact duplicate."""
    text = "the refund for order 1234 has not arrived after two weeks"
    hidden = (
        "the re\u200bfund for or\u00adder 1234 has\u200d not arr\u2060ived after two\u200e weeks"
    )
    write_jsonl(tmp_path / "train.jsonl", [{"text": hidden}, {"text": "other"}])
    write_jsonl(tmp_path / "eval.jsonl", [{"text": "unrelated"}])
    write_jsonl(tmp_path / "test.jsonl", [{"text": text}])
    report = check_leakage(splits(tmp_path, sealed=False))
    assert pair(report, "train", "test").exact == 1 and not report.ok
    assert normalise("a\ufeffb\u200c c") == "ab c"


def test_pairs_below_the_threshold_stay_apart(tmp_path: Path) -> None:
    rng = random.Random(3)
    base = [sentence(rng) for _ in range(50)]
    write_jsonl(tmp_path / "train.jsonl", [{"text": t} for t in base])
    # 10 of 100 words changed: Jaccard of 3-word shingles far below 0.8
    far = [{"text": change_words(t, 10, rng)} for t in base[:20]]
    write_jsonl(tmp_path / "eval.jsonl", far)
    write_jsonl(tmp_path / "test.jsonl", [{"text": sentence(rng)}])
    report = check_leakage(splits(tmp_path), threshold=0.8)
    assert all(p.exact == 0 and p.near == 0 for p in report.pairs)
    assert report.ok


def test_within_train_duplicates(tmp_path: Path) -> None:
    rng = random.Random(5)
    a = sentence(rng)
    rows = [{"text": a}, {"text": sentence(rng)}, {"text": a.upper()}, {"text": a}]
    rows.append({"text": change_words(a, 1, rng)})
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "eval.jsonl", [{"text": "x"}])
    write_jsonl(tmp_path / "test.jsonl", [{"text": "y"}])
    report = check_leakage(splits(tmp_path))
    within = pair(report, "train", "train")
    assert (within.exact, within.near) == (2, 1)
    assert report.ok and report.leaking["train"] == set()


def test_write_clean_drops_leaks_and_keeps_every_other_byte(project: dict[str, object]) -> None:
    root: Path = project["root"]  # type: ignore[assignment]
    (root / "train.jsonl").write_bytes(
        (root / "train.jsonl").read_bytes().replace(b'{"messages"', b'{ "messages"', 3) + b"\n"
    )  # odd spacing and a trailing blank line survive byte for byte
    before = (root / "train.jsonl").read_bytes()
    out = root / "clean.jsonl"
    result = run_cli("data", "check", str(project["manifest"]), "--write-clean", str(out))
    assert result.returncode == 1, result.stderr
    assert (root / "train.jsonl").read_bytes() == before
    kept = before.splitlines(keepends=True)
    dropped = {3, 4, 5, 6, 7}  # 0-based lines of records 4-8
    assert out.read_bytes().splitlines(keepends=True) == [
        line for i, line in enumerate(kept) if i not in dropped
    ]
    from ftmanifest.hashing.files import hash_file

    assert hash_file(out, use_cache=False).digest in result.stdout
    again = check_leakage([Split("train", "train", out), *splits(root)[1:]])
    assert again.ok and all(p.exact + p.near == 0 for p in again.pairs if p.a != p.b)


def test_write_clean_refuses_the_input(project: dict[str, object]) -> None:
    root: Path = project["root"]  # type: ignore[assignment]
    before = (root / "train.jsonl").read_bytes()
    result = run_cli("data", "check", str(project["manifest"]), "--write-clean",
                     str(root / "." / "train.jsonl"))  # fmt: skip
    assert result.returncode == 2 and "training file itself" in result.stderr
    assert "Traceback" not in result.stderr
    assert (root / "train.jsonl").read_bytes() == before
    with pytest.raises(UsageError):
        write_clean(root / "train.jsonl", "jsonl", {1}, root / "train.jsonl")


def test_write_clean_refuses_a_pinned_folder(project: dict[str, object]) -> None:
    """A clean copy written into the model's folder would change its tree digest."""
    root: Path = project["root"]  # type: ignore[assignment]
    (root / "model").mkdir()
    out = root / "model" / "train-clean.jsonl"
    result = run_cli("data", "check", str(project["manifest"]), "--write-clean", str(out))
    assert result.returncode == 2 and "pinned model's folder" in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


def test_csv_columns_are_the_text_and_rows_are_cleaned_whole(tmp_path: Path) -> None:
    rng = random.Random(9)
    texts = [sentence(rng) for _ in range(5)]
    rows = ["id,prompt,completion,label\r\n"]
    for i, t in enumerate(texts):
        rows.append(f'{i},"{t}","multi\nline answer {i}",x\r\n')
    (tmp_path / "train.csv").write_text("".join(rows), newline="")
    (tmp_path / "eval.csv").write_text(
        f'id,prompt,completion,label\n9,"{texts[2].upper()}","MULTI line answer 2",y\n'
    )
    (tmp_path / "test.csv").write_text("id,prompt,completion,label\n1,nothing,alike,z\n")
    report = check_leakage(splits(tmp_path, "csv"))
    assert pair(report, "train", "eval").exact == 1  # id and label are not text
    assert report.leaking["train"] == {3}
    out = tmp_path / "clean.csv"
    write_clean(tmp_path / "train.csv", "csv", report.leaking["train"], out)
    assert out.read_bytes() == "".join(rows[:3] + rows[4:]).encode()
    only_label = check_leakage(
        [
            Split(s.name, s.role, s.path, s.format, s.sealed, ("label",))
            for s in splits(tmp_path, "csv")
        ]
    )
    assert pair(only_label, "train", "eval").exact == 0


def test_text_fields_defaults_and_override() -> None:
    assert record_text(chat("hi", "there")) == "hi\nthere"
    assert record_text({"prompt": "p", "completion": "c", "meta": "m"}) == "p\nc"
    assert record_text({"text": "t", "id": "7"}) == "t"
    assert record_text({"a": "x", "b": ["y"]}) == "x\ny"
    assert record_text({"text": "t", "note": "n"}, ("note",)) == "n"


@given(st.text())
def test_normalisation_is_idempotent(text: str) -> None:
    once = normalise(text)
    assert normalise(once) == once


def test_normalisation_folds_width_case_and_spaces() -> None:
    assert normalise("  Ｈｅｌｌｏ\t\nWORLD  ") == "hello world"


def test_unusable_inputs_name_the_file(project: dict[str, object], tmp_path: Path) -> None:
    root: Path = project["root"]  # type: ignore[assignment]
    (root / "eval.jsonl").write_text('{"text": "a"}\n{broken\n')
    result = run_cli("data", "check", str(project["manifest"]))
    assert result.returncode == 2 and "eval.jsonl:2" in result.stderr
    assert "Traceback" not in result.stderr
    images = root / "images.yaml"
    images.write_text(project["manifest"].read_text().replace(  # type: ignore[attr-defined]
        "path: eval.jsonl}", "path: eval.jsonl, format: images}"))  # fmt: skip
    with pytest.raises(InputError, match="is not a folder"):
        check_data(images, threshold=0.8)
    (root / "test.jsonl").unlink()
    result = run_cli("data", "check", str(project["manifest"]))
    assert result.returncode == 2 and "data[2].path" in result.stderr
    result = run_cli("data", "check", str(project["manifest"]), "--threshold", "0")
    assert result.returncode == 2 and "--threshold" in result.stderr


def test_json_output(project: dict[str, object]) -> None:
    result = run_cli("data", "check", str(project["manifest"]), "--format", "json")
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and payload["leaking_train_records"] == {"train": 5}
    first = next(p for p in payload["pairs"] if {p["a"], p["b"]} == {"train", "test"})
    assert first["severity"] == "error" and first["examples"][0]["b"]["line"] == 8


def test_lint_verify_scan_do_not_import_rensa(project: dict[str, object]) -> None:
    import subprocess
    import sys

    manifest = str(project["manifest"])
    code = (
        "import sys\n"
        "from ftmanifest.cli import main\n"
        f"main(['lint', {manifest!r}])\n"
        f"main(['verify', {manifest!r}, '--no-signature'])\n"
        f"main(['scan', {manifest!r}])\n"
        "print('HEAVY', sorted(m for m in ('rensa',) if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_threshold_is_honoured_and_bands_favour_recall(project: dict[str, object]) -> None:
    from ftmanifest.data.leakage import MIN_RECALL, NUM_PERM, lsh_shape

    strict = check_leakage(splits(project["root"]), threshold=0.95)  # type: ignore[arg-type]
    assert pair(strict, "train", "test").near == 0 and strict.ok  # J of 2 words of 100 < 0.95
    for threshold in (0.5, 0.7, 0.8, 0.9, 0.95):
        bands, rows = lsh_shape(threshold)
        assert bands * rows == NUM_PERM
        assert 1 - (1 - threshold**rows) ** bands >= MIN_RECALL


def _tolerant(project: dict[str, object], checks: str) -> Path:
    manifest: Path = project["manifest"]  # type: ignore[assignment]
    manifest.write_text(manifest.read_text() + "data_checks:\n" + checks)
    return manifest


def test_tolerance_from_the_manifest_allows_up_to_its_count(
    project: dict[str, object],
) -> None:
    """train vs eval holds 3 exact duplicates: allowed 3 passes, allowed 2 refuses."""
    root: Path = project["root"]  # type: ignore[assignment]
    (root / "test.jsonl").write_text(json.dumps(chat("nothing alike at all")) + "\n")
    tolerance = "  tolerance:\n    train_eval: {exact: %d, near: 1}\n"
    manifest = _tolerant(project, tolerance % 3)
    result = run_cli("data", "check", str(manifest), "--format", "json")
    payload = json.loads(result.stdout)
    train_eval = next(p for p in payload["pairs"] if (p["b"], p["a"]) == ("train", "eval"))
    assert (train_eval["exact"], train_eval["severity"]) == (3, "warning")
    assert train_eval["tolerance"] == {
        "field": "data_checks.tolerance.train_eval", "exact": 3, "near": 1}  # fmt: skip
    assert result.returncode == 0 and payload["ok"] is True, result.stdout
    manifest.write_text(manifest.read_text().replace("exact: 3", "exact: 2"))
    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 1
    assert ("REFUSED: train vs eval: 3 exact duplicate(s), 2 allowed by "
            "data_checks.tolerance.train_eval.exact") in result.stdout  # fmt: skip
    assert "--write-clean" in result.stdout


def test_null_tolerance_is_a_warning_and_sealed_binds_any_pair(
    project: dict[str, object],
) -> None:
    """Unbounded train vs test still refuses a near duplicate of the sealed test split;
    unbounding sealed too leaves a warning, exit 0."""
    manifest = _tolerant(project, "  tolerance:\n    train_test: {exact: null, near: null}\n")
    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 1
    assert "data_checks.tolerance.sealed.near" in result.stdout
    manifest.write_text(manifest.read_text() + "    sealed: {exact: null, near: null}\n")
    result = run_cli("data", "check", str(manifest), "--format", "json")
    assert result.returncode == 0, result.stdout
    train_test = next(p for p in json.loads(result.stdout)["pairs"] if p["a"] == "test"
                      and p["b"] == "train")  # fmt: skip
    assert (train_test["near"], train_test["severity"]) == (1, "warning")


def test_within_eval_and_test_duplicates(tmp_path: Path) -> None:
    rng = random.Random(8)
    a, b = sentence(rng), sentence(rng)
    write_jsonl(tmp_path / "train.jsonl", [{"text": sentence(rng)}])
    write_jsonl(tmp_path / "eval.jsonl", [{"text": a}, {"text": " " + a.upper()},
                                          {"text": change_words(a, 1, rng)}])  # fmt: skip
    write_jsonl(tmp_path / "test.jsonl", [{"text": b}, {"text": change_words(b, 2, rng)}])
    report = check_leakage(splits(tmp_path))
    assert (pair(report, "eval", "eval").exact, pair(report, "eval", "eval").near) == (1, 1)
    assert (pair(report, "test", "test").exact, pair(report, "test", "test").near) == (0, 1)
    assert report.ok  # within_eval allows any by default: a warning
    assert pair(report, "test", "test").tolerance == "within_eval"
    from ftmanifest.manifest.data import LeakTolerance, PairTolerance

    strict = LeakTolerance(within_eval=PairTolerance(exact=0, near=0))
    report = check_leakage(splits(tmp_path), tolerance=strict)
    refused = sorted((p.a, b.field) for p in report.pairs for b in p.breaches)
    assert refused == [("eval", "data_checks.tolerance.within_eval.exact"),
                       ("eval", "data_checks.tolerance.within_eval.near"),
                       ("test", "data_checks.tolerance.within_eval.near")]  # fmt: skip


def test_threshold_and_fields_come_from_the_manifest(project: dict[str, object]) -> None:
    manifest = _tolerant(project, "  near_threshold: 0.99\n")
    result = run_cli("data", "check", str(manifest), "--format", "json")
    payload = json.loads(result.stdout)
    assert (payload["threshold"], payload["threshold_source"]) == (
        0.99, "data_checks.near_threshold")  # fmt: skip
    assert result.returncode == 0, result.stdout  # the sealed near duplicate is below 0.99
    result = run_cli("data", "check", str(manifest), "--threshold", "0.8")
    assert result.returncode == 1 and "Jaccard >= 0.8 (--threshold;" in result.stdout
    manifest.write_text(manifest.read_text() + "  text_fields: [nothing_here]\n")
    result = run_cli("data", "check", str(manifest))
    assert result.returncode == 2, result.stdout  # nothing to compare is not "no leakage"
    assert "none of its 2 records has text in nothing_here" in result.stderr
    assert "data_checks.text_fields" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("data", "check", str(manifest), "--field", "messages", "--threshold", "0.8")
    assert result.returncode == 1  # the flag overrides the manifest's fields


def test_records_without_text_are_counted(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", [{"text": "a b c d"}, {"text": ""}, {"id": 3}])
    write_jsonl(tmp_path / "eval.jsonl", [{"text": "x y z"}])
    write_jsonl(tmp_path / "test.jsonl", [{"text": "  "}, {"text": "q"}])
    report = check_leakage(splits(tmp_path))
    assert report.without_text == {"test": 1, "eval": 0, "train": 2}  # no string at all
    assert report.records == {"test": 2, "eval": 1, "train": 3}
    (tmp_path / "exp.yaml").write_text(MANIFEST.format(ext="jsonl", sealed="true"))
    result = run_cli("data", "check", str(tmp_path / "exp.yaml"))
    assert "records without text (not compared): test 1, train 2" in result.stdout


def test_templated_records_bound_the_near_search_and_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records from one template are all near duplicates of each other: n**2 pairs.  The
    search keeps at most MAX_PAIRS candidate pairs per split pair; past it the count is a
    floor, a warning when the tolerance leaves near open, a refusal when it bounds it."""
    from ftmanifest.data import leakage
    from ftmanifest.manifest.data import LeakTolerance, PairTolerance

    monkeypatch.setattr(leakage, "MAX_PAIRS", 40)
    rng = random.Random(4)
    template = sentence(rng, 75)
    write_jsonl(tmp_path / "train.jsonl", [{"text": template + " " + sentence(rng, 3)}
                                           for _ in range(30)])  # fmt: skip
    write_jsonl(tmp_path / "eval.jsonl", [{"text": sentence(rng)}])
    write_jsonl(tmp_path / "test.jsonl", [{"text": sentence(rng)}])
    report = check_leakage(splits(tmp_path))
    within = pair(report, "train", "train")
    assert not within.complete and 0 < within.near <= 40
    assert report.ok and not within.breaches  # near open by default: a warning
    bounded = LeakTolerance(within_train=PairTolerance(near=10_000))
    report = check_leakage(splits(tmp_path), tolerance=bounded)
    (breach,) = pair(report, "train", "train").breaches
    assert breach.floor and breach.field == "data_checks.tolerance.within_train.near"
    assert not report.ok
    monkeypatch.setattr(leakage, "MAX_PAIRS", 10_000)
    report = check_leakage(splits(tmp_path), tolerance=bounded)
    full = pair(report, "train", "train")
    assert full.complete and full.near == 30 * 29 // 2 and report.ok
