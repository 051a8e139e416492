"""The data a Trainer reads is traced to pinned entries; pinned entries load by digest.

The real tiny example project, locked; real ``datasets`` 5.2 and TRL trainers
on the CPU; nothing downloaded.  Each attack is a test: a stale Arrow cache
(datasets serves it: shown first), a file the manifest does not pin (also a
preference file handed to DPOTrainer), the eval file as the train dataset,
and datasets that cannot be traced.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import pytest
import torch

from ftmanifest.errors import EXIT_INPUT, EXIT_REFUSED, InputError, UsageError
from ftmanifest.integrations.data_trace import trace_dataset
from ftmanifest.integrations.datasets import (
    CACHE_RULE,
    DIGEST_RULE,
    ORIGIN_RULE,
    UNTRACED_RULE,
    DataDigestError,
    DataTrace,
    load_pinned_dataset,
)
from ftmanifest.statcache import cache_dir

datasets.disable_progress_bars()


# `locked` and `example`: the Trainer guard's fixtures (tests/integrations/conftest.py).


def _plain(path: Path, hf: Path) -> Any:
    """What a user writes: ``load_dataset("json", data_files=PATH)`` (with its own cache)."""
    return datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(hf))


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _rewrite_keeping_mtime(path: Path) -> None:
    """Other bytes of the same length, mtime put back, as ``cp -p``/``rsync -a``/``tar x`` do."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    at = data.index(b"department")
    data[at] = ord("D")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size


def _repin(manifest: Path, name: str) -> None:
    """Pin entry ``name``'s bytes as they are now: what ``lock`` writes, without its settle wait."""
    from ftmanifest.manifest import load_manifest
    from ftmanifest.verify.observe import hash_path

    (entry,) = [e for e in load_manifest(manifest).manifest.data if e.name == name]
    digest = hash_path(manifest.parent / entry.path, manifest.parent, use_cache=False).digest
    assert digest is not None and entry.digest is not None
    manifest.write_text(manifest.read_text("utf-8").replace(entry.digest, digest))


def _rows(trace: DataTrace) -> list[tuple[str, str | None, str]]:
    return [(f.rule, f.field, f.severity) for f in trace.findings]


def _require_traced(manifest: Path) -> None:
    text = manifest.read_text("utf-8")
    manifest.write_text(text.replace("security:\n", "security:\n  require_traced_data: true\n"))


# --- the stale Arrow cache -------------------------------------------------------


def test_a_stale_arrow_cache_is_served_by_datasets_and_refused(example: Path, tmp_path: Path):
    train = example.parent / "data" / "train.jsonl"
    before = _records(train)
    _plain(train, tmp_path / "hf")  # the cache now holds these bytes
    _rewrite_keeping_mtime(train)
    _repin(example, "train")  # the manifest pins the new bytes
    stale = _plain(train, tmp_path / "hf")
    # datasets serves the old rows: its cache is keyed by path and mtime.
    assert stale[0]["messages"] == before[0]["messages"] != _records(train)[0]["messages"]

    trace = trace_dataset(stale, example, "train")
    assert _rows(trace) == [(CACHE_RULE, "data[0].digest", "error")]
    row = trace.findings[0]
    assert "predates its pinned bytes" in row.message and "train.jsonl" in str(row.expected)
    assert "load_pinned_dataset" in str(row.hint) and row.path == str(example)
    assert trace.traced  # the origin is known: it is the pinned train file's stale cache

    fresh = load_pinned_dataset(example, "train")
    assert fresh.to_list() == _records(train)
    assert _rows(trace_dataset(fresh, example, "train")) == []


# --- files the manifest does not pin ---------------------------------------------


def test_a_train_file_the_manifest_does_not_pin_is_refused(example: Path, tmp_path: Path):
    extra = example.parent / "data" / "extra.jsonl"
    extra.write_text(
        "".join(json.dumps(r) + "\n" for r in _records(example.parent / "data" / "train.jsonl")[:5])
    )
    trace = trace_dataset(_plain(extra, tmp_path / "hf"), example, "train")
    assert _rows(trace) == [(ORIGIN_RULE, "data", "error")]
    row = trace.findings[0]
    assert str(extra) in str(row.observed) and "data[0] 'train'" in str(row.expected)
    assert not trace.traced and trace.record["origins"][0]["entries"] == []


def test_a_preference_file_the_manifest_does_not_pin_is_refused_under_dpo(
    example: Path, tmp_path: Path
):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    prefs = example.parent / "prefs.jsonl"
    pair = {
        "prompt": "hello , my invoice is wrong .",
        "chosen": " billing",
        "rejected": " shipping",
    }
    prefs.write_text((json.dumps(pair) + "\n") * 8)
    folder = example.parent / "model"
    trainer = DPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(folder),
        args=DPOConfig(output_dir=str(tmp_path / "out"), max_length=16, use_cpu=True, report_to=[]),
        train_dataset=_plain(prefs, tmp_path / "hf"),
        processing_class=AutoTokenizer.from_pretrained(folder),
    )
    trace = trace_dataset(trainer.train_dataset, example, "train")
    assert _rows(trace) == [(ORIGIN_RULE, "data", "error")]
    assert str(prefs) in str(trace.findings[0].observed)


def test_the_eval_file_as_the_train_dataset_is_refused(example: Path, tmp_path: Path):
    evaluation = _plain(example.parent / "data" / "eval.jsonl", tmp_path / "hf")
    trace = trace_dataset(evaluation, example, "train")
    assert _rows(trace) == [(ORIGIN_RULE, "data[1].role", "error")]
    row = trace.findings[0]
    assert "role eval" in row.message and "data[0] 'train'" in str(row.expected)
    assert "load_pinned_dataset" in str(row.hint)
    assert _rows(trace_dataset(evaluation, example, "eval")) == []
    as_dict = trace_dataset({"dev": evaluation}, example, "eval")
    assert (
        as_dict.traced
        and as_dict.record["parts"]["dev"]["origins"][0]["entries"][0]["name"] == "eval"
    )


def test_a_split_of_one_load_is_traced_to_its_own_file(example: Path, tmp_path: Path):
    data = example.parent / "data"
    both = datasets.load_dataset(
        "json",
        data_files={"train": str(data / "train.jsonl"), "validation": str(data / "eval.jsonl")},
        cache_dir=str(tmp_path / "hf"),
    )
    assert _rows(trace_dataset(both["train"].map(lambda r: {"n": 1}), example, "train")) == []
    assert _rows(trace_dataset(both["validation"], example, "train")) == [
        (ORIGIN_RULE, "data[1].role", "error")
    ]


def test_a_file_inside_a_pinned_folder_entry_is_traced_to_it(example: Path, tmp_path: Path):
    shards = example.parent / "data" / "shards"
    shards.mkdir()
    lines = (example.parent / "data" / "train.jsonl").read_text("utf-8").splitlines(True)
    (shards / "part-0.jsonl").write_text("".join(lines[:30]))
    (shards / "part-1.jsonl").write_text("".join(lines[30:]))
    text = example.read_text("utf-8")
    entry = "  - {name: shards, role: train, path: data/shards, format: jsonl, digest: sha256:%s}\n"
    example.write_text(text.replace("data:\n", "data:\n" + entry % ("0" * 64), 1))
    _repin(example, "shards")
    assert len(load_pinned_dataset(example, "shards")) == len(lines)
    for files in (str(shards / "part-1.jsonl"), str(shards / "*.jsonl")):
        trace = trace_dataset(_plain(Path(files), tmp_path / "hf"), example, "train")
        assert _rows(trace) == [] and trace.traced, files
        assert {"shards"} <= {e["name"] for e in trace.record["origins"][0]["entries"]}


# --- derived datasets ------------------------------------------------------------


def test_a_mapped_filtered_shuffled_dataset_is_still_traced(example: Path, tmp_path: Path):
    ds = _plain(example.parent / "data" / "train.jsonl", tmp_path / "hf")
    derived = (
        ds.map(lambda r: {"text": r["messages"][1]["content"] + " " + r["label"]})
        .filter(lambda r: r["label"] != "billing")
        .shuffle(seed=0)
        .select(range(10))
        .remove_columns(["messages"])
    )
    trace = trace_dataset(derived, example, "train")
    # Traced to its pinned file, and a difference: 10 of its rows (data_rows_test).
    assert _rows(trace) == [("drift.data-rows", "data[0]", "error")] and trace.traced
    (origin,) = trace.record["origins"]
    assert origin["entries"][0]["field"] == "data[0]" and origin["proof"].endswith("content")
    json.dumps(trace.record)  # JSON-able, for the run record


def test_sft_trainers_tokenised_dataset_is_traced(example: Path, tmp_path: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    folder = example.parent / "model"
    ds = load_pinned_dataset(example, "train").map(
        lambda r: {"prompt": r["messages"][1]["content"], "completion": " " + r["label"]},
        remove_columns=["messages", "label"],
    )
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(folder),
        # the manifest's seq_len: at 16 TRL drops a row it truncates away (a drift.data-rows row)
        args=SFTConfig(output_dir=str(tmp_path / "out"), max_length=32, use_cpu=True, report_to=[]),
        train_dataset=ds,
        processing_class=AutoTokenizer.from_pretrained(folder),
    )
    assert isinstance(trainer.train_dataset, datasets.Dataset)
    assert "input_ids" in trainer.train_dataset.column_names
    trace = trace_dataset(trainer.train_dataset, example, "train")
    assert _rows(trace) == [] and trace.record["origins"][0]["proof"] == "stamp"


# --- load_pinned_dataset ---------------------------------------------------------


def test_load_pinned_dataset_round_trip_from_a_digest_keyed_cache(example: Path):
    train = example.parent / "data" / "train.jsonl"
    ds = load_pinned_dataset(example, "train")
    assert ds.to_list() == _records(train)
    digest = trace_dataset(ds, example, "train").record["origins"][0]["entries"][0]["digest"]
    home = cache_dir() / "datasets" / ("file-" + digest.replace(":", "-"))
    assert all(Path(c["filename"]).is_relative_to(home / "hf") for c in ds.cache_files)
    assert (home / "files" / "train.jsonl").read_bytes() == train.read_bytes()


def test_two_pinned_digests_never_share_a_cache(example: Path):
    train = example.parent / "data" / "train.jsonl"
    first = load_pinned_dataset(example, "train")
    _rewrite_keeping_mtime(train)  # same path, same mtime: what fools datasets' own cache
    _repin(example, "train")
    second = load_pinned_dataset(example, "train")
    assert second.to_list() == _records(train) != first.to_list()
    folders = {Path(c["filename"]).parents[5] for d in (first, second) for c in d.cache_files}
    assert len(folders) == 2
    # The first dataset now holds bytes the manifest no longer pins.
    assert _rows(trace_dataset(first, example, "train")) == [(ORIGIN_RULE, "data", "error")]


def test_a_digest_mismatch_is_refused(example: Path):
    _rewrite_keeping_mtime(example.parent / "data" / "train.jsonl")
    with pytest.raises(DataDigestError) as info:
        load_pinned_dataset(example, "train")
    err = info.value
    assert err.exit_code == EXIT_REFUSED and err.field == "data[0].digest"
    assert err.expected and err.observed and err.expected != err.observed
    assert "ftmanifest lock" in (err.hint or "") and err.findings[0].rule == DIGEST_RULE


def test_a_private_copy_that_changed_is_deleted_and_refused(example: Path):
    ds = load_pinned_dataset(example, "train")
    copy = Path(ds.cache_files[0]["filename"]).parents[5] / "files" / "train.jsonl"
    copy.chmod(0o600)
    copy.write_bytes(copy.read_bytes().replace(b"department", b"Department", 1))
    with pytest.raises(DataDigestError, match="private copy"):
        load_pinned_dataset(example, "train")
    assert not copy.exists()
    assert load_pinned_dataset(example, "train").to_list() == ds.to_list()  # copied again


def test_a_pinned_file_datasets_cannot_parse_is_refused_without_a_traceback(example: Path):
    (example.parent / "data" / "train.jsonl").write_text('{"text": "ok"}\nnot json\n')
    _repin(example, "train")
    with pytest.raises(InputError) as info:
        load_pinned_dataset(example, "train")
    assert info.value.field == "data[0].format" and info.value.exit_code == EXIT_INPUT
    assert "DatasetGenerationError" in str(info.value.observed)


@pytest.mark.parametrize("key", ["data_files", "cache_dir", "revision", "download_mode", "split"])
def test_kwargs_the_manifest_chooses_are_refused(example: Path, key: str):
    chosen: dict[str, Any] = {key: "x"}
    with pytest.raises(UsageError) as info:
        load_pinned_dataset(example, "train", **chosen)
    assert info.value.field == key and info.value.exit_code == EXIT_INPUT


def test_an_unknown_entry_name_is_refused(example: Path):
    with pytest.raises(UsageError) as info:
        load_pinned_dataset(example, "training")
    err = info.value
    assert err.field == "data[].name" and err.observed == "'training'"
    assert err.expected == "'train', 'eval', 'test'"


# --- what cannot be traced ---------------------------------------------------------


class _TorchRows(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        return {"input_ids": [i]}


def _generate() -> Iterator[dict[str, int]]:
    yield {"x": 1}


@pytest.mark.parametrize(
    "make",
    [
        _TorchRows,
        lambda: [{"input_ids": [1]}],
        _generate,
        lambda: datasets.Dataset.from_list([{"x": 1}]).to_iterable_dataset(),
        lambda: datasets.Dataset.from_list([{"x": 1}]),
        lambda: None,
    ],
    ids=["torch-dataset", "list", "generator", "iterable-dataset", "in-memory-dataset", "none"],
)
def test_an_untraceable_dataset_warns_and_is_refused_when_required(example: Path, make: Any):
    dataset = make()
    trace = trace_dataset(dataset, example, "train")
    assert _rows(trace) == [(UNTRACED_RULE, "security.require_traced_data", "warning")]
    assert not trace.traced and trace.record["reason"]
    _require_traced(example)
    assert _rows(trace_dataset(dataset, example, "train")) == [
        (UNTRACED_RULE, "security.require_traced_data", "error")
    ]


def test_an_arrow_cache_that_cannot_be_read_is_an_error(example: Path, tmp_path: Path):
    ds = _plain(example.parent / "data" / "train.jsonl", tmp_path / "hf")
    shutil.rmtree(tmp_path / "hf")
    trace = trace_dataset(ds, example, "train")
    assert _rows(trace) == [(ORIGIN_RULE, "data", "error")] and not trace.traced
    assert "gone" in trace.findings[0].message


def test_a_dataset_saved_to_disk_cannot_be_proved_and_is_refused(example: Path, tmp_path: Path):
    ds = load_pinned_dataset(example, "train").map(lambda r: {"n": 1})
    ds.save_to_disk(str(tmp_path / "saved"))
    trace = trace_dataset(datasets.load_from_disk(str(tmp_path / "saved")), example, "train")
    assert _rows(trace) == [(ORIGIN_RULE, "data", "error")] and not trace.traced
    assert "save_to_disk" in trace.findings[0].message


def test_an_arrow_file_changed_after_load_pinned_dataset_built_it_is_refused(example: Path):
    ds = load_pinned_dataset(example, "train")
    arrow = Path(ds.cache_files[0]["filename"])
    st = arrow.stat()
    arrow.chmod(0o600)
    data = bytearray(arrow.read_bytes())
    at = data.index(b"department")
    data[at] = ord("D")
    arrow.write_bytes(bytes(data))
    os.utime(arrow, ns=(st.st_atime_ns, st.st_mtime_ns))
    trace = trace_dataset(ds, example, "train")
    assert _rows(trace) == [(CACHE_RULE, "data", "error")]
    assert arrow.name in str(trace.findings[0].observed)
    again = load_pinned_dataset(example, "train")  # built again from the verified copy
    assert again.to_list() == _records(example.parent / "data" / "train.jsonl")
    assert _rows(trace_dataset(again, example, "train")) == []
    (arrow.parent / "ftmanifest-stamp.json").unlink()
    assert _rows(trace_dataset(again, example, "train")) == [(CACHE_RULE, "data", "error")]
    # Unstamped, the folder is not trusted: built again rather than stamped as found.
    assert _rows(trace_dataset(load_pinned_dataset(example, "train"), example, "train")) == []


# --- the eval dataset, judged when the Trainer evaluates ------------------------


def _scored(ds: Any, tok: Any) -> Any:
    """``ds`` tokenised for a causal LM (fixed length, loss on every real token)."""

    def encode(row: dict[str, Any]) -> dict[str, Any]:
        text = row["messages"][1]["content"] + " " + row["label"]
        ids = tok(text, truncation=True, max_length=24, padding="max_length")
        pairs = zip(ids["input_ids"], ids["attention_mask"], strict=True)
        labels = [t if m else -100 for t, m in pairs]
        return {**ids, "labels": labels}

    return ds.map(encode, remove_columns=ds.column_names)


def _evaluating(example: Path, tmp_path: Path, eval_dataset: Any) -> tuple[Any, Any]:
    from transformers import AutoTokenizer

    from ftmanifest.examples.training import tiny_trainer
    from ftmanifest.integrations.transformers import FtManifestCallback

    tok = AutoTokenizer.from_pretrained(example.parent / "model")
    guard = FtManifestCallback(example, signature=False)
    trainer = tiny_trainer(
        example.parent, tmp_path / "out", [guard], tokenizer=tok,
        eval_dataset=_scored(eval_dataset, tok), eval_strategy="steps", eval_steps=1,
        eval_on_start=True,
    )  # fmt: skip
    return trainer, guard


def test_the_train_file_as_the_eval_dataset_stops_the_run_before_step_one(
    example: Path, tmp_path: Path
):
    from ftmanifest.integrations.transformers import RUN_RECORD, EvalRefusedError

    trainer, _ = _evaluating(example, tmp_path, load_pinned_dataset(example, "train"))
    with pytest.raises(EvalRefusedError) as err:
        trainer.train()
    assert trainer.state.global_step == 0
    (row,) = err.value.report.findings
    assert row.rule == ORIGIN_RULE and "role train" in row.message
    assert "data[1] 'eval'" in str(row.expected) and "evaluation refused" in err.value.message
    record = json.loads((tmp_path / "out" / RUN_RECORD).read_text("utf-8"))
    assert record["status"] == "failed" and "evaluation refused" in record["reason"]


def test_the_pinned_eval_entry_evaluates_and_is_recorded(example: Path, tmp_path: Path):
    from ftmanifest.integrations.transformers import RUN_RECORD

    trainer, _ = _evaluating(example, tmp_path, load_pinned_dataset(example, "eval"))
    trainer.train()
    assert trainer.state.global_step == 3
    record = json.loads((tmp_path / "out" / RUN_RECORD).read_text("utf-8"))
    assert record["status"] == "completed"
    (traced,) = record["eval_data"]
    assert traced["role"] == "eval" and traced["origins"][0]["entries"][0]["name"] == "eval"
