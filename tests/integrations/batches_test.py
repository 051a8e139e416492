"""The guard records what a real ``transformers.Trainer`` fed the model, on the CPU.

Checked against a capture of the test's own (a forward pre-hook registered
before training): the ids, the loss mask and the attention mask of the first
micro-batches, the decoded text with a fake AWS key in the training text
redacted (and its token withheld), and the start digests that tell two
attempts of one manifest apart in ``ledger list``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
)

from ftmanifest.cli import main
from ftmanifest.examples.project import build_example
from ftmanifest.examples.tiny import build_model, default_corpus
from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.batches import MAX_BATCHES
from ftmanifest.integrations.transformers import RUN_RECORD, FtManifestCallback
from ftmanifest.verify.lock import lock_manifest
from tests.integrations.trainer_guard_test import example, locked  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore")
KEY = "AKIA" + "QWB5PDKHX6PYGPAN"  # shaped like an AWS access key id; not a real one
QUIET = {"report_to": [], "save_strategy": "no", "disable_tqdm": True, "logging_strategy": "no"}
LORA = "method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj, v_proj]\n"


@pytest.fixture(scope="module")
def keyed_locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny example whose tokenizer knows the key as a word (so verify does not scan
    the model), loss on every token, locked."""
    manifest = build_example(tmp_path_factory.mktemp("keyed"), arch="llama", seed=0)
    build_model(manifest.parent / "model", arch="llama", seed=0,
                corpus=[*default_corpus(0), f"key {KEY} is here"])  # fmt: skip
    text = manifest.read_text("utf-8").replace("loss_on: completion", "loss_on: all")
    text = text.replace("on: [verify, audit]", "on: [audit]")  # its vocabulary holds the key
    manifest.write_text(text, "utf-8")
    lock_manifest(manifest)
    return manifest


@pytest.fixture
def keyed(keyed_locked: Path, tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "keyed"
    shutil.copytree(keyed_locked.parent, folder)
    with torch.random.fork_rng(devices=[]):
        yield folder / keyed_locked.name


def capture(model: Any) -> list[dict[str, torch.Tensor]]:
    """Every training forward's tensors, seen by a hook of the test's own."""
    seen: list[dict[str, torch.Tensor]] = []

    def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if module.training and torch.is_grad_enabled():
            seen.append({k: v.detach().clone() for k, v in kwargs.items() if torch.is_tensor(v)})

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return seen


def bits(row: torch.Tensor) -> str:
    return "".join("1" if bool(x) else "0" for x in row.tolist())


def assert_recorded_as_fed(record: dict[str, Any], seen: list[dict[str, torch.Tensor]]) -> None:
    """Each recorded row is the row the model was fed: ids, loss mask, attention mask."""
    batches = record["batches"]["micro_batches"]
    assert len(batches) == MAX_BATCHES and len(seen) > MAX_BATCHES  # the hook stopped recording
    for batch, fed in zip(batches, seen, strict=False):
        assert batch["loss_mask_from"] == "labels != -100"
        assert batch["examples"]
        for ex in batch["examples"]:
            ids = fed["input_ids"][ex["row"]]
            shown = ex["input_ids"]
            assert [a for a, b in zip(shown, ids.tolist(), strict=True) if a is not None] == [
                b for a, b in zip(shown, ids.tolist(), strict=True) if a is not None
            ]
            assert ex["loss_mask"] == bits(fed["labels"][ex["row"]] != -100)
            assert ex["attention_mask"] == bits(fed["attention_mask"][ex["row"]])
            assert ex["loss_tokens"] == int((fed["labels"][ex["row"]] != -100).sum())
    first = {k: v for k, v in seen[0].items() if k != "num_items_in_batch"}
    h = hashlib.sha256()
    for name in sorted(first):
        t = first[name].contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0{len(data)}\n".encode())
        h.update(data)
    assert record["first_batch_digest"] == "sha256:" + h.hexdigest()


def test_a_collated_batch_is_recorded_as_fed_and_a_key_in_it_is_redacted(
    keyed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ftmanifest.integrations.builders import training_arguments

    folder = keyed.parent / "model"
    tok = AutoTokenizer.from_pretrained(folder)
    texts = [
        f"billing invoice {i} " + (f"key {KEY} is here" if i % 2 else "refund") for i in range(12)
    ]
    rows = [dict(tok(t, truncation=True, max_length=32)) for t in texts]
    model = AutoModelForCausalLM.from_pretrained(folder)
    seen = capture(model)
    out = tmp_path / "out"
    trainer = Trainer(
        model=model, args=training_arguments(keyed, output_dir=str(out), use_cpu=True, **QUIET),
        train_dataset=rows, data_collator=DataCollatorForLanguageModeling(tok, mlm=False),
        processing_class=tok, callbacks=[FtManifestCallback(keyed, signature=False)],
    )  # fmt: skip
    trainer.train()

    written = (out / RUN_RECORD).read_text("utf-8")
    record = json.loads(written)
    assert record["status"] == "completed"
    assert_recorded_as_fed(record, seen)
    examples = [ex for b in record["batches"]["micro_batches"] for ex in b["examples"]]
    keyed_rows = [ex for ex in examples if ex["redacted"]]
    plain = [ex for ex in examples if not ex["redacted"]]
    assert keyed_rows and plain
    for ex in keyed_rows:
        assert "[REDACTED:secret.aws-access-key-id:" in ex["text"]
        assert ex["input_ids"].count(None) == 1  # the key's one token is withheld
        assert tok.convert_tokens_to_ids(KEY) not in ex["input_ids"]
    for ex in plain:
        ids = seen[0]["input_ids"] if ex in record["batches"]["micro_batches"][0]["examples"] \
            else seen[1]["input_ids"]  # fmt: skip
        fed = ids[ex["row"]][: ex["tokens"]]
        assert ex["text"] == tok.decode(fed, clean_up_tokenization_spaces=False)
    ledger = "".join(p.read_text("utf-8") for p in (keyed.parent / ".ftmanifest").rglob("*")
                     if p.is_file())  # fmt: skip
    assert KEY not in written and KEY not in ledger
    assert KEY[4:] not in written  # not even the key without its prefix

    # data sample shows those rows, the key still redacted, in text and as JSON
    capsys.readouterr()  # what the Trainer printed
    shown = []
    for extra in ([], ["--format", "json"]):
        assert (
            main(["data", "sample", str(keyed), "--from-run", str(out / RUN_RECORD), *extra]) == 0
        )
        shown.append(capsys.readouterr().out)
    assert shown[0].startswith(f"from the trainer's own batches (run record {out / RUN_RECORD})")
    assert "[REDACTED" in shown[0] and "[[" in shown[0]
    assert all(KEY[4:] not in text for text in shown)
    # what data sample computes itself is preflight's formatting, not this script's: it says so
    assert main(["data", "sample", str(keyed), "--per-category", "1", "--split", "train"]) == 0
    assert capsys.readouterr().out.startswith(
        "computed by ftmanifest's preprocessing (not the trainer's batches)"
    )


def _lora_run(manifest: Path, out: Path, init_seed: int) -> dict[str, Any]:
    from peft import get_peft_model

    from ftmanifest.integrations.builders import lora_config
    from ftmanifest.integrations.transformers import load_pinned

    model, tok = load_pinned(manifest)
    torch.manual_seed(init_seed)  # what draws the LoRA's initial weights
    model = get_peft_model(model, lora_config(manifest))
    guard = FtManifestCallback(manifest, signature=False)
    trainer = tiny_trainer(manifest.parent, out, [guard], model=model, tokenizer=tok)
    trainer.train()
    record: dict[str, Any] = json.loads((out / RUN_RECORD).read_text("utf-8"))
    return record


def _listed(manifest: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()  # what the Trainer printed
    assert main(["ledger", "list", "--manifest", str(manifest), "--format", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_two_lora_inits_of_one_manifest_are_listed_as_different_starts(
    example: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    example.write_text(example.read_text("utf-8").replace("method:\n  kind: full\n", LORA))
    a = _lora_run(example, tmp_path / "a", 1)
    b = _lora_run(example, tmp_path / "b", 1)
    assert a["initial_trainable"]["tensors"] == 8  # lora_A and lora_B of q and v, 2 layers
    assert a["initial_trainable_digest"] == b["initial_trainable_digest"]
    assert a["first_batch_digest"] == b["first_batch_digest"] is not None
    listed = _listed(example, capsys)
    assert [x["different_start"] for x in listed["attempts"]] == [[], []]  # control

    c = _lora_run(example, tmp_path / "c", 2)
    assert c["initial_trainable_digest"] != a["initial_trainable_digest"]
    assert c["first_batch_digest"] == a["first_batch_digest"]
    listed = _listed(example, capsys)
    notes = {x["attempt"]: x["different_start"] for x in listed["attempts"]}
    (note,) = notes[c["attempt"]]
    assert "initial trainable weights" in note and a["attempt"] in note
    assert b["attempt"] in note and "not the same run" in note
    capsys.readouterr()
    assert main(["ledger", "list", "--manifest", str(example)]) == 0
    text = capsys.readouterr().out
    assert "different start" in text and "not the same run" in text
    assert main(["ledger", "show", c["attempt"], "--manifest", str(example)]) == 0
    assert "different start:" in capsys.readouterr().out
    assert main(["ledger", "show", a["attempt"], "--manifest", str(example), "--format",
                 "json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["different_start"]
