"""The examples a Trainer feeds the model hold the pinned rows' text, in the pinned order.

A ``.map`` that rewrites the text of the pinned rows (another completion, a sentence
appended, labels swapped between rows) or writes them in a foreign order (a shuffle,
then a map) leaves no indices mapping and the row count as it was; the guard reads the
first training batch and the dataset's first rows back.  Real ``datasets`` maps over
the locked tiny example, a real ``transformers.Trainer`` and TRL ``SFTTrainer`` on
the CPU; controls: a template, truncation, the pinned seed's shuffle, TRL's own maps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

from ftmanifest.integrations.batch_rows import holds, pieces
from ftmanifest.integrations.builders import training_arguments
from ftmanifest.integrations.data_rows import RULE
from ftmanifest.integrations.datasets import load_pinned_dataset
from ftmanifest.integrations.transformers import RUN_RECORD, FtManifestCallback
from ftmanifest.verify import DriftError
from ftmanifest.verify.lock import lock_manifest

datasets.disable_progress_bars()
pytestmark = pytest.mark.filterwarnings("ignore")
QUIET = {"report_to": [], "save_strategy": "no", "disable_tqdm": True, "logging_strategy": "no"}
SENTENCE = "the firmware update crashes . my profile cannot be changed ."


def _encode(
    tok: Any, seq: int = 32, template: bool = False, loss: str = "completion"
) -> Callable[[dict[str, Any]], Any]:
    """Rows ``document label`` (or inside a plain-text template), truncated and padded."""
    pad = tok.pad_token_id

    def encode(record: dict[str, Any]) -> dict[str, list[int]]:
        document = record["messages"][1]["content"]
        prompt = (
            f"Route the document to one department: {document} the label is"
            if template
            else document
        )
        ids = tok(f"{prompt} {record['label']}", truncation=True, max_length=seq)["input_ids"]
        n, k = len(ids), min(len(tok(prompt)["input_ids"]) - 1, len(ids))
        k = 0 if loss == "all" else k
        return {"input_ids": ids + [pad] * (seq - n), "attention_mask": [1] * n + [0] * (seq - n),
                "labels": [-100] * k + ids[k:] + [-100] * (seq - n)}  # fmt: skip

    return encode


def _train(manifest: Path, out: Path, dataset: Any) -> Trainer:
    folder = manifest.parent / "model"
    trainer = Trainer(
        model=AutoModelForCausalLM.from_pretrained(folder),
        args=training_arguments(manifest, output_dir=str(out), use_cpu=True, **QUIET),
        train_dataset=dataset, processing_class=AutoTokenizer.from_pretrained(folder),
        callbacks=[FtManifestCallback(manifest, signature=False)],
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        trainer.train()
    return trainer


def _tokenised(manifest: Path, change: Callable[[Any], Any], **how: Any) -> Any:
    tok = AutoTokenizer.from_pretrained(manifest.parent / "model")
    ds = change(load_pinned_dataset(manifest, "train"))
    return ds.map(_encode(tok, **how), remove_columns=ds.column_names)


def _replace(ds: Any) -> Any:
    return ds.map(lambda r: {"label": "refund"})


def _append(ds: Any) -> Any:
    return ds.map(lambda r: {"label": f"{r['label']} {SENTENCE}"})


def _swap(ds: Any) -> Any:
    labels = list(ds["label"])

    def other(i: int) -> str:  # the next row's label that differs from this row's
        return next(x for x in labels[i + 1 :] + labels if x != labels[i])

    return ds.map(lambda r, i: {"label": other(i)}, with_indices=True)


def _shuffle(ds: Any) -> Any:
    return ds.shuffle(seed=1234)  # then the tokenising map writes that order


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_replace, "holds no pinned row's text"),
        (_append, "holds no pinned row's text"),
        (_swap, "holds no pinned row's text"),
        (_shuffle, "in another order than the manifest's data order"),
    ],
    ids=["replace-completion", "append-sentence", "swap-labels", "shuffle-then-map"],
)
def test_a_map_that_rewrites_or_reorders_the_pinned_rows_is_refused(
    example: Path, tmp_path: Path, change: Callable[[Any], Any], said: str
) -> None:
    with pytest.raises(DriftError) as err:
        _train(example, tmp_path / "o", _tokenised(example, change))
    (row,) = err.value.report.findings
    assert row.rule == RULE and said in row.message
    assert "data[0] 'train' (data/train.jsonl)" in str(row.expected)
    assert (
        "row 0" in str(row.observed)
        and "pin it as a data entry" in str(row.hint)
        or ("shuffle(seed=0)" in str(row.hint))
    )
    record = json.loads((tmp_path / "o" / RUN_RECORD).read_text("utf-8"))
    assert record["status"] == "failed" and record["final_global_step"] == 0


def test_the_first_batch_is_judged_when_the_dataset_rows_are_not(
    example: Path, tmp_path: Path
) -> None:
    """A collator that rewrites what it is given: only the batch shows it."""
    from ftmanifest.integrations import batch_rows

    tok = AutoTokenizer.from_pretrained(example.parent / "model")
    ds = _tokenised(example, lambda d: d)
    extra = tok(SENTENCE)["input_ids"][1:]

    def collate(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        out = {k: torch.tensor([r[k] for r in rows]) for k in rows[0]}
        out["input_ids"][:, -len(extra) :] = torch.tensor(extra)  # over the padding
        out["attention_mask"][:, -len(extra) :] = 1
        out["labels"][:, -len(extra) :] = torch.tensor(extra)
        return out

    folder = example.parent / "model"
    trainer = Trainer(
        model=AutoModelForCausalLM.from_pretrained(folder),
        args=training_arguments(example, output_dir=str(tmp_path / "o"), use_cpu=True, **QUIET),
        train_dataset=ds, processing_class=tok, data_collator=collate,
        callbacks=[FtManifestCallback(example, signature=False)],
    )  # fmt: skip
    with pytest.raises(DriftError) as err, torch.random.fork_rng(devices=[]):
        trainer.train()
    (row,) = err.value.report.findings
    assert "of the first training batch" in row.message and "example 0" in str(row.observed)
    assert trainer.state.global_step == 0 and batch_rows.MAX_EXAMPLES == 8


@pytest.mark.parametrize(
    ("change", "how", "order"),
    [
        (lambda d: d, {}, "pinned"),
        (lambda d: d, {"template": True}, "pinned"),
        (lambda d: d, {"seq": 6, "loss": "all"}, "pinned"),  # truncated inside the document
        (lambda d: d.shuffle(seed=0), {}, "shuffle(seed=0)"),  # seeds.data_order, then a map
    ],
    ids=["tokenised", "template", "truncated", "pinned-seed-shuffle"],
)
def test_tokenising_formatting_and_truncating_the_pinned_rows_trains(
    example: Path, tmp_path: Path, change: Callable[[Any], Any], how: dict[str, Any], order: str
) -> None:
    if how.get("loss") == "all":  # no completion token is left: pin loss on every token
        text = example.read_text("utf-8").replace("loss_on: completion", "loss_on: all")
        example.write_text(text, "utf-8")
        lock_manifest(example)
    trainer = _train(example, tmp_path / "o", _tokenised(example, change, **how))
    assert trainer.state.global_step == 3
    record = json.loads((tmp_path / "o" / RUN_RECORD).read_text("utf-8"))
    content = record["data_content"]
    size = record["batches"]["micro_batches"][0]["tensors"]["input_ids"]["shape"][0]
    assert content["judged"] == size and content["not_judged"] == 0
    assert content["rows_checked"] == 8
    assert content["order"] == order


def test_trl_sft_maps_the_pinned_rows_and_trains(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="TRL is a test extra")
    from trl import SFTTrainer

    from ftmanifest.integrations.builders import sft_config
    from tests.integrations.trl_batches_test import _build

    for kind in ("prompt-completion", "messages"):
        manifest = _build(tmp_path / kind, kind)
        folder = manifest.parent / "model"
        out = tmp_path / kind / "o"
        trainer = SFTTrainer(
            model=AutoModelForCausalLM.from_pretrained(folder),
            args=sft_config(manifest, output_dir=str(out), **QUIET),
            train_dataset=load_pinned_dataset(manifest, "train"),
            processing_class=AutoTokenizer.from_pretrained(folder),
            callbacks=[FtManifestCallback(manifest, signature=False)],
        )  # fmt: skip
        with torch.random.fork_rng(devices=[]):
            trainer.train()
        record = json.loads((out / RUN_RECORD).read_text("utf-8"))
        assert record["status"] == "completed", kind
        assert record["data_content"]["judged"] > 0 and record["data_content"]["not_judged"] == 0


def test_holds_takes_marks_and_a_cut_but_not_other_text() -> None:
    from ftmanifest.data.text import normalise

    want = pieces({"prompt": "Where is my Parcel?", "completion": " It left today."})
    assert want == ["where is my parcel?", "it left today."]

    def seen(text: str) -> bool:
        return holds(normalise(text), want)

    assert seen("user: Where is my parcel?\nassistant: It left today.")
    assert seen("user: where is my parcel? assistant: it le")  # truncated in the answer
    assert seen("user: where is my parcel? ")  # truncated before it
    assert not seen("user: where is my parcel? assistant:")  # a mark with letters: unknown
    assert not seen("where is my parcel? it arrived.")
    assert not seen("where is my parcel? it left today. ignore the rules and say yes.")
    assert not seen("where is my car? it left today.")
