"""The rows a Trainer reads are the pinned entry's rows: a filter, a select or a shuffle
of pinned data is a difference the manifest does not state.

Real ``datasets`` 5.2 objects over the locked tiny example; the guard's cases
with a real ``transformers.Trainer`` on the CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
import pytest

from ftmanifest.integrations.data_rows import RULE
from ftmanifest.integrations.data_trace import trace_dataset
from ftmanifest.integrations.datasets import load_pinned_dataset

datasets.disable_progress_bars()
pytestmark = pytest.mark.filterwarnings("ignore")


def _plain(manifest: Path, hf: Path) -> Any:
    train = manifest.parent / "data" / "train.jsonl"
    return datasets.load_dataset("json", data_files=str(train), split="train", cache_dir=str(hf))


def _rows(dataset: Any, manifest: Path) -> list[Any]:
    return trace_dataset(dataset, manifest, "train").findings


def _seed(manifest: Path, seed: int) -> None:
    text = manifest.read_text("utf-8").replace("  data_order: 0\n", f"  data_order: {seed}\n")
    manifest.write_text(text, "utf-8")


def test_a_filter_dropping_one_category_is_refused(example: Path, tmp_path: Path) -> None:
    ds = load_pinned_dataset(example, "train")
    kept = ds.filter(lambda r: r["label"] != "billing")
    assert 0 < len(kept) < len(ds)
    (row,) = _rows(kept, example)
    assert row.rule == RULE and row.field == "data[0]" and row.severity == "error"
    assert f"{len(kept)} of {len(ds)} rows" in str(row.observed) and ".filter" in str(row.observed)
    assert f"all {len(ds)} rows of data[0] 'train'" in str(row.expected)
    assert "pin it as its own data entry" in str(row.hint)
    flat = kept.flatten_indices()  # the subset written out: fewer rows, no mapping
    (row,) = _rows(flat, example)
    assert f"{len(kept)} rows" in str(row.observed) and row.rule == RULE


def test_a_select_of_the_first_half_is_refused(example: Path, tmp_path: Path) -> None:
    ds = _plain(example, tmp_path / "hf")
    (row,) = _rows(ds.select(range(len(ds) // 2)), example)
    # datasets slices the table for a contiguous range: no mapping, fewer rows
    assert row.rule == RULE and "select of a contiguous range" in str(row.observed)
    assert f"{len(ds) // 2} rows" in str(row.observed) and f"the {len(ds)} rows" in row.expected
    (row,) = _rows(ds.select(list(range(0, len(ds), 2))[::-1]), example)
    assert "another order" in str(row.observed)


def test_a_shuffle_with_another_seed_than_data_order_is_refused(example: Path) -> None:
    ds = load_pinned_dataset(example, "train")
    (row,) = _rows(ds.shuffle(seed=1234), example)
    assert row.rule == RULE and "seeds.data_order=0" in str(row.expected)
    assert "shuffle(seed=0)" in str(row.hint)
    (row,) = _rows(ds.shuffle(seed=0).select(range(10)), example)  # shuffled, then a subset
    assert "10 of" in str(row.observed) and "another order" in str(row.observed)


def test_controls_pinned_rows_tokenised_or_shuffled_with_the_pinned_seed_pass(
    example: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(example.parent / "model")
    for ds in (load_pinned_dataset(example, "train"), _plain(example, tmp_path / "hf")):
        tokenised = ds.map(lambda r: tok(r["messages"][1]["content"]), remove_columns=["label"])
        trace = trace_dataset(tokenised, example, "train")
        assert trace.findings == [] and trace.record["selection"] == "none"
        keep_all = tokenised.filter(lambda r: True)  # TRL's filters that drop nothing
        assert _rows(keep_all, example) == []
    _seed(example, 7)
    again = load_pinned_dataset(example, "train").shuffle(seed=7)
    shuffled = trace_dataset(again, example, "train")
    assert shuffled.findings == []
    assert shuffled.record["selection"] == "shuffle(seed=seeds.data_order)"


# --- under the Trainer guard -----------------------------------------------------


def _encoded(manifest: Path, tok: Any, ds: Any) -> Any:
    """The rows ``examples.tiny.lm_examples`` builds, by ``.map`` over a traced dataset."""
    pad, seq = tok.pad_token_id, 32

    def encode(record: dict[str, Any]) -> dict[str, list[int]]:
        document = record["messages"][1]["content"]
        ids = tok(f"{document} {record['label']}", truncation=True, max_length=seq)["input_ids"]
        prompt = len(tok(document)["input_ids"]) - 1
        labels = [-100] * min(prompt, len(ids)) + ids[prompt:]
        n = len(ids)
        return {"input_ids": ids + [pad] * (seq - n), "attention_mask": [1] * n + [0] * (seq - n),
                "labels": labels + [-100] * (seq - n)}  # fmt: skip

    return ds.map(encode, remove_columns=ds.column_names)


def _trainer(manifest: Path, out: Path, make: Any, then: Any = None) -> Any:
    from transformers import AutoTokenizer

    from ftmanifest.examples.training import tiny_trainer
    from ftmanifest.integrations.transformers import FtManifestCallback

    tok = AutoTokenizer.from_pretrained(manifest.parent / "model")
    trainer = tiny_trainer(manifest.parent, out, [FtManifestCallback(manifest, signature=False)])
    encoded = _encoded(manifest, tok, make(load_pinned_dataset(manifest, "train")))
    trainer.train_dataset = then(encoded) if then is not None else encoded
    return trainer


def _same(ds: Any) -> Any:
    return ds


@pytest.mark.parametrize(
    ("make", "then"),
    [
        (lambda ds: ds.filter(lambda r: r["label"] != "billing"), None),
        (lambda ds: ds.select(range(len(ds) // 2)), None),
        (_same, lambda ds: ds.shuffle(seed=1234)),  # tokenised, then shuffled
    ],
    ids=["filter", "select", "shuffle"],
)
def test_the_guard_refuses_training_on_a_subset_or_another_order(
    example: Path, tmp_path: Path, make: Any, then: Any
) -> None:
    from ftmanifest.integrations.transformers import DriftRefusedError

    trainer = _trainer(example, tmp_path / "o", make, then)
    with pytest.raises(DriftRefusedError) as err:
        trainer.train()
    assert trainer.state.global_step == 0
    assert [f.field for f in err.value.report.findings if f.rule == RULE] == ["data[0]"]


def test_the_guard_trains_the_pinned_rows_the_trainer_shuffles_itself(
    example: Path, tmp_path: Path
) -> None:
    trainer = _trainer(example, tmp_path / "o", _same)
    trainer.train()
    assert trainer.state.global_step == 3
