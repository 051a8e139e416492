"""What TRL's trainers feed the model, recorded by the guard and shown by ``data sample``.

Real ``SFTTrainer``/``DPOTrainer`` on the CPU, each checked against a capture of
the test's own (a forward pre-hook registered before training): the guard's
recorded rows are the rows fed; ``data sample --from-run`` shows them; what
``data sample`` computes itself for ``objective.kind: sft`` is what the
trainer fed, token for token (prompt/completion and messages), while
preflight's formatting is not (TRL appends the EOS text to a completion and
this tokenizer appends one more); for DPO it says it cannot.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="TRL is a test extra: pip install -e '.[dev]'")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import DPOTrainer, SFTTrainer  # noqa: E402

from ftmanifest.cli import main  # noqa: E402
from ftmanifest.examples.project import build_example  # noqa: E402
from ftmanifest.examples.tiny import DEPARTMENTS  # noqa: E402
from ftmanifest.integrations.transformers import (  # noqa: E402
    RUN_RECORD,
    FtManifestCallback,
    dpo_config,
    sft_config,
)
from ftmanifest.verify.lock import lock_manifest  # noqa: E402
from tests.integrations.batches_test import capture  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")
QUIET = {"report_to": [], "save_strategy": "no", "disable_tqdm": True, "logging_strategy": "no"}
TEMPLATE = "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}"
SFT = "  precision: fp32\n  objective:\n    kind: sft\n"
DPO = "  precision: fp32\n  objective:\n    kind: dpo\n    beta: 0.1\n    loss_type: sigmoid\n"


def _records(manifest: Path) -> list[dict[str, Any]]:
    lines = (manifest.parent / "data" / "train.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _pairs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for i, r in enumerate(records):
        other = DEPARTMENTS[(DEPARTMENTS.index(r["label"]) + 1 + i) % len(DEPARTMENTS)]
        other = other if other != r["label"] else DEPARTMENTS[0]
        rows.append({"prompt": r["messages"][1]["content"], "chosen": " " + r["label"],
                     "rejected": " " + other})  # fmt: skip
    return rows


def _build(root: Path, kind: str) -> Path:
    """The tiny example with its train split as ``kind`` records, locked."""
    manifest = build_example(root, arch="llama", seed=0)
    records = _records(manifest)
    text = manifest.read_text("utf-8")
    if kind == "prompt-completion":
        rows = [{"prompt": r["messages"][1]["content"], "completion": " " + r["label"]}
                for r in records]  # fmt: skip
        text = text.replace("  precision: fp32\n", SFT)
    elif kind == "messages":
        config = manifest.parent / "model" / "tokenizer_config.json"
        config.write_text(json.dumps({**json.loads(config.read_text("utf-8")),
                                      "chat_template": TEMPLATE}), "utf-8")  # fmt: skip
        rows = [{"messages": r["messages"]} for r in records]
        # TRL trains every token of a conversation (no assistant-only loss asked for)
        text = text.replace("  precision: fp32\n", SFT)
        text = text.replace("loss_on: completion", "loss_on: all")
    else:
        rows = _pairs(records)
        text = text.replace("  precision: fp32\n", DPO)
    (manifest.parent / "data" / "train.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), "utf-8"
    )
    manifest.write_text(text, "utf-8")
    lock_manifest(manifest)
    return manifest


Trained = tuple[Path, Path, dict[str, Any], list[dict[str, torch.Tensor]]]


@pytest.fixture(scope="module", params=["prompt-completion", "messages", "dpo"])
def trained(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Trained]:
    """One run of the trainer for ``kind``: the manifest, the output folder, the run
    record and the test's own capture of every training forward."""
    root = tmp_path_factory.mktemp(request.param)
    manifest = _build(root, request.param)
    with torch.random.fork_rng(devices=[]):
        record, seen = _train(manifest, root / "out")
        yield manifest, root / "out", record, seen


def _train(manifest: Path, out: Path) -> tuple[dict[str, Any], list[dict[str, torch.Tensor]]]:
    folder = manifest.parent / "model"
    model = AutoModelForCausalLM.from_pretrained(folder)
    seen = capture(model)
    dpo = "kind: dpo" in manifest.read_text("utf-8")
    make, config = (DPOTrainer, dpo_config) if dpo else (SFTTrainer, sft_config)
    trainer = make(
        model=model, args=config(manifest, output_dir=str(out), **QUIET),
        train_dataset=Dataset.from_list(_records(manifest)),
        processing_class=AutoTokenizer.from_pretrained(folder),
        callbacks=[FtManifestCallback(manifest, signature=False)],
    )  # fmt: skip
    trainer.train()
    record: dict[str, Any] = json.loads((out / RUN_RECORD).read_text("utf-8"))
    assert record["status"] == "completed"
    return record, seen


def _fed(batch: dict[str, torch.Tensor], row: int) -> tuple[tuple[int, ...], str]:
    """A fed row without its padding: ids and the loss mask (labels != -100)."""
    keep = batch["attention_mask"][row].bool()
    ids = batch["input_ids"][row][keep].tolist()
    loss = (batch["labels"][row][keep] != -100).tolist()
    return tuple(ids), "".join("1" if x else "0" for x in loss)


def _sample(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["data", "sample", *argv])
    return code, capsys.readouterr().out


def test_the_guard_records_what_trl_fed_and_data_sample_shows_it(
    trained: Trained, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, out_dir, record, seen = trained
    batches = record["batches"]["micro_batches"]
    assert len(batches) == 2 and len(seen) > 2  # the recorder stopped after two
    pairs = "kind: dpo" in manifest.read_text("utf-8")
    for batch, fed in zip(batches, seen, strict=False):
        assert batch["loss_mask_from"] == "labels != -100" and batch["examples"]
        half = fed["input_ids"].shape[0] // 2
        for ex in batch["examples"]:
            ids, loss = _fed(fed, ex["row"])
            assert ex["input_ids"] == fed["input_ids"][ex["row"]].tolist()  # padding included
            assert ex["attention_mask"] == "".join(
                "1" if x else "0" for x in fed["attention_mask"][ex["row"]].tolist()
            )
            assert ex["tokens"] == len(ids) and ex["loss_tokens"] == loss.count("1") > 0
            kept = zip(ex["loss_mask"], ex["attention_mask"], strict=True)
            assert "".join(b for b, k in kept if k == "1") == loss
            if pairs:  # DPO stacks the chosen rows, then the rejected ones
                assert ex["pair"] == ("chosen" if ex["row"] < half else "rejected")
        if pairs:
            assert {ex["row"] for ex in batch["examples"]} == set(range(2 * half))

    code, out = _sample(capsys, str(manifest), "--from-run", str(out_dir / RUN_RECORD))
    assert code == 0
    assert out.startswith(f"from the trainer's own batches (run record {out_dir}")
    first = batches[0]["examples"][0]
    assert f"row 0{' (chosen)' if pairs else ''}: {first['tokens']} tokens, " \
           f"loss on {first['loss_tokens']}" in out  # fmt: skip
    assert "[[" in first["marked"] and first["marked"] in out.replace('\\"', '"')
    code, out = _sample(capsys, str(manifest), "--from-run", record["attempt"], "--format", "json")
    assert code == 0
    shown = json.loads(out)["micro_batches"]
    assert [[ex["input_ids"] for ex in b["examples"]] for b in shown] == [
        [ex["input_ids"] for ex in b["examples"]] for b in batches
    ]


def test_data_sample_computes_what_sft_feeds_or_says_it_cannot(
    trained: Trained, capsys: pytest.CaptureFixture[str]
) -> None:
    from ftmanifest.data.sample_payload import sample_payload
    from ftmanifest.manifest import load_manifest
    from ftmanifest.preflight.recipe import IGNORE, default_format

    manifest, _out, _record, seen = trained
    fed = {_fed(b, r) for b in seen for r in range(b["input_ids"].shape[0])}
    code, out = _sample(capsys, str(manifest), "--per-category", "50", "--split", "train")
    assert code == 0
    if "kind: dpo" in manifest.read_text("utf-8"):
        assert out.startswith("cannot show DPO's batches itself (training.objective.kind: dpo)")
        assert "--from-run" in out.splitlines()[0] and "NOT RENDERED" in out
        return
    assert out.startswith("computed by ftmanifest's preprocessing (not the trainer's batches): "
                          "as TRL's SFTTrainer prepares it")  # fmt: skip
    loaded = load_manifest(manifest)
    payload = sample_payload(loaded, per_category=1000, splits=["train"])
    shown = {
        (tuple(t["id"] for t in ex["rendered"]["tokens"]),
         "".join("1" if t["loss"] else "0" for t in ex["rendered"]["tokens"]))
        for c in payload["splits"][0]["categories"] for ex in c["examples"]
    }  # fmt: skip
    assert len(fed) >= 8 and fed <= shown  # every row fed is one data sample shows, token for token
    # preflight's own formatting (what data sample showed for SFT before) is not what TRL fed
    tok = AutoTokenizer.from_pretrained(manifest.parent / "model")
    m = loaded.manifest
    own = set()
    for r in _records(manifest):
        ex = default_format(r, tok, m.training.seq_len, m.training.loss_on)
        own.add((tuple(ex.input_ids), "".join("0" if x == IGNORE else "1" for x in ex.labels)))
    assert not fed & own


def test_a_record_without_batches_is_refused_naming_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("ftmanifest: 1\n", "utf-8")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"status": "completed", "attempt": "a1"}), "utf-8")
    assert main(["data", "sample", str(manifest), "--from-run", str(old)]) == 2
    err = capsys.readouterr().err
    assert "holds no batches" in err and "written before the Trainer guard kept them" in err
    none = {"micro_batches": [], "why_not": "no training forward pass ran"}
    old.write_text(json.dumps({"batches": none}))
    assert main(["data", "sample", str(manifest), "--from-run", str(old)]) == 2
    assert "the guard did not record any: no training forward pass ran" in capsys.readouterr().err
    assert main(["data", "sample", str(manifest), "--from-run", "nosuchattempt"]) == 2
    assert "no attempt by that id" in capsys.readouterr().err
