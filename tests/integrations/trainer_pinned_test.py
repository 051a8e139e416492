"""The Trainer guard checks the model it was handed, not only the manifest.

A hub cache laid out on disk as huggingface_hub does it holds two snapshots of
``org/tiny`` (A: the example's model, B: other weights, same tokenizer); the
manifest pins A.  With ``refs/main`` moved to B, ``from_pretrained(repo)`` loads
B while every pinned file of A still verifies: the guard must refuse that model
before step 0, and ``load_pinned`` must load A.  Real models, a real Trainer.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    Trainer,
)

from ftmanifest.errors import EXIT_INPUT, UsageError
from ftmanifest.examples.tiny import build_model, default_corpus
from ftmanifest.examples.training import tiny_trainer
from ftmanifest.hfcache import SnapshotNotFoundError
from ftmanifest.integrations.model_origin import ORIGIN_RULE, WEIGHTS_RULE, unwrap_model
from ftmanifest.integrations.transformers import (
    RUN_RECORD,
    FtManifestCallback,
    load_pinned,
)
from ftmanifest.verify import verify_manifest
from tests.integrations.trainer_guard_test import example, locked  # noqa: F401
from tests.integrations.trainer_guard_test import refused as _refused
from tests.support.hubcache import build_hub_cache

REPO = "org/tiny"
STEPS = 3  # the example manifest's training.max_steps


@dataclass
class Hub:
    manifest: Path
    cache: Path
    a: str  # the pinned commit
    b: str

    def snapshot(self, commit: str) -> Path:
        return self.cache / ("models--" + REPO.replace("/", "--")) / "snapshots" / commit

    def move_main(self, commit: str) -> None:
        (self.snapshot(commit).parent.parent / "refs" / "main").write_text(commit)


@pytest.fixture(scope="module")
def other_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Snapshot B: the same architecture and tokenizer as the example, other weights."""
    folder = tmp_path_factory.mktemp("b") / "model"
    return build_model(folder, seed=1, corpus=default_corpus(0))


@pytest.fixture
def hub(
    example: Path,  # noqa: F811  (the fixture imported above)
    other_weights: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Hub:
    """The locked example, its model moved into a hub cache (main -> A) and pinned by commit."""
    cache = tmp_path / "hf-cache"
    snapshots = {"a": example.parent / "model", "b": other_weights}
    commits = build_hub_cache(cache, REPO, snapshots, {"main": "a"})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # Read at import, and needed: transformers asks the hub for adapter_config.json
    # on a load by repo id even with local_files_only=True (retrying for ~23 s offline).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    # and the cache, as a process started with HF_HUB_CACHE has it: the guard refuses a
    # process whose imported huggingface_hub reads another cache than the one verified
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    text = example.read_text("utf-8")
    assert text.count("  path: model\n") == 1
    pin = f"  repo: {REPO}\n  revision: {commits['a']}\n"
    example.write_text(text.replace("  path: model\n", pin), "utf-8")
    shutil.rmtree(example.parent / "model")  # only the cache holds the model now
    return Hub(example, cache, commits["a"], commits["b"])


@pytest.fixture(scope="module")
def tok(other_weights: Path) -> Any:
    """The tokenizer every snapshot here shares."""
    return AutoTokenizer.from_pretrained(other_weights)


def _trainer(model: Any, tok: Any, manifest: Path, out: Path, **options: Any) -> Trainer:
    """A real Trainer on the example's data for ``model``, guarded by ``manifest``."""
    guard = FtManifestCallback(manifest, signature=False, **options)
    trainer: Trainer = tiny_trainer(
        manifest.parent, out, [guard], max_steps=STEPS, model=model, tokenizer=tok
    )
    return trainer


def _record(out: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((out / RUN_RECORD).read_text("utf-8"))
    return record


def test_a_moved_main_loads_the_other_commit_and_is_refused_before_step_0(
    hub: Hub, tmp_path: Path, tok: Any
) -> None:
    hub.move_main(hub.b)
    assert verify_manifest(hub.manifest, signature=False).ok  # the files of A still verify
    # cache_dir: huggingface_hub read HF_HUB_CACHE when it was first imported
    model = AutoModelForCausalLM.from_pretrained(REPO, local_files_only=True, cache_dir=hub.cache)
    b = load_file(hub.snapshot(hub.b) / "model.safetensors")
    assert torch.equal(model.model.embed_tokens.weight, b["model.embed_tokens.weight"])

    out = tmp_path / "out"
    err = _refused(_trainer(model, tok, hub.manifest, out))
    [row] = err.report.findings
    assert (row.kind, row.rule, row.field) == ("drift", ORIGIN_RULE, "model.revision")
    assert row.expected and hub.a in row.expected and hub.b not in row.expected
    assert row.observed and f"{REPO}@{hub.b}" in row.observed
    assert row.hint and "load_pinned(" in row.hint
    assert hub.a in str(err) and hub.b in str(err)

    record = _record(out)
    assert record["status"] == "refused"
    assert [(f["rule"], f["field"]) for f in record["findings"]] == [
        (ORIGIN_RULE, "model.revision")
    ]
    assert record["model_origin"]["name_or_path"] == REPO


def test_load_pinned_trains_with_main_moved(hub: Hub, tmp_path: Path, tok: Any) -> None:
    hub.move_main(hub.b)
    model, pinned_tok = load_pinned(hub.manifest)
    assert Path(model.config._name_or_path) == hub.snapshot(hub.a)
    assert pinned_tok is not None and pinned_tok.get_vocab() == tok.get_vocab()
    assert load_pinned(hub.manifest, tokenizer=False)[1] is None

    out = tmp_path / "out"
    trainer = _trainer(model, tok, hub.manifest, out)
    trainer.train()
    assert trainer.state.global_step == STEPS
    record = _record(out)
    assert record["status"] == "completed" and record["findings"] == []
    origin = record["model_origin"]
    assert origin["traced"] is True and origin["weights_compared"] > 0
    assert hub.a in origin["pinned"]


def test_a_snapshot_folder_of_another_commit_is_refused(hub: Hub, tmp_path: Path, tok: Any) -> None:
    model = AutoModelForCausalLM.from_pretrained(hub.snapshot(hub.b), local_files_only=True)
    err = _refused(_trainer(model, tok, hub.manifest, tmp_path / "out"))
    [row] = err.report.findings
    assert row.rule == ORIGIN_RULE and row.observed and row.observed.startswith(f"{REPO}@{hub.b}")


def test_another_revision_typed_by_hand_is_caught_by_the_weights(
    hub: Hub, tmp_path: Path, tok: Any
) -> None:
    """main is A, so the repo id traces; transformers records no revision, the weights do."""
    model = AutoModelForCausalLM.from_pretrained(
        REPO, revision=hub.b, local_files_only=True, cache_dir=hub.cache
    )
    err = _refused(_trainer(model, tok, hub.manifest, tmp_path / "out"))
    [row] = err.report.findings
    assert (row.rule, row.field) == (WEIGHTS_RULE, "model.files")
    assert row.observed and "tensors differ" in row.observed


def test_a_model_built_from_the_pinned_config_is_caught_by_the_weights(
    hub: Hub, tmp_path: Path, tok: Any
) -> None:
    """``from_config`` carries the pinned folder as its name but random weights."""
    config = AutoConfig.from_pretrained(hub.snapshot(hub.a))
    # not the pinned weights' seed (the example's 0): a test before may have left
    # torch's generator freshly seeded with 0 (a Trainer seeds it), and the same seed on
    # the same architecture draws the pinned weights themselves, which the guard rightly
    # passes (seen with -n 2 after tests/verify and tests/cli: "DID NOT RAISE")
    torch.manual_seed(2)
    model = AutoModelForCausalLM.from_config(config)
    assert Path(model.config._name_or_path) == hub.snapshot(hub.a)
    err = _refused(_trainer(model, tok, hub.manifest, tmp_path / "out"))
    assert [f.rule for f in err.report.findings] == [WEIGHTS_RULE]


def test_load_pinned_refuses_a_missing_snapshot_and_a_second_revision(hub: Hub) -> None:
    with pytest.raises(UsageError) as usage:
        load_pinned(hub.manifest, revision=hub.b)
    assert usage.value.field == "revision" and "manifest" in usage.value.message
    shutil.rmtree(hub.snapshot(hub.a))
    with pytest.raises(SnapshotNotFoundError) as err:
        load_pinned(hub.manifest)
    assert err.value.exit_code == EXIT_INPUT and err.value.field == "model.revision"
    assert err.value.expected and hub.a in err.value.expected
    assert (
        err.value.hint and f"huggingface-cli download {REPO} --revision {hub.a}" in err.value.hint
    )


def test_peft_over_the_pinned_model_trains_and_over_another_is_refused(
    hub: Hub, tmp_path: Path, tok: Any
) -> None:
    from peft import LoraConfig, get_peft_model

    def lora() -> LoraConfig:
        return LoraConfig(r=2, target_modules=["q_proj", "v_proj"])

    text = hub.manifest.read_text("utf-8")  # the manifest declares the LoRA that trains
    lora_method = "method:\n  kind: lora\n  r: 2\n  alpha: 8\n  dropout: 0.0\n"
    lora_method += "  target_modules: [q_proj, v_proj]\n"
    hub.manifest.write_text(text.replace("method:\n  kind: full\n", lora_method), "utf-8")
    pinned, _ = load_pinned(hub.manifest, tokenizer=False)
    trainer = _trainer(get_peft_model(pinned, lora()), tok, hub.manifest, tmp_path / "ok")
    trainer.train()
    assert trainer.state.global_step == STEPS
    assert _record(tmp_path / "ok")["model_origin"]["weights_compared"] > 0

    other = AutoModelForCausalLM.from_pretrained(hub.snapshot(hub.b), local_files_only=True)
    err = _refused(_trainer(get_peft_model(other, lora()), tok, hub.manifest, tmp_path / "no"))
    assert [f.rule for f in err.report.findings] == [ORIGIN_RULE]


def test_ddp_and_compile_wrappers_unwrap_to_the_model(tmp_path: Path) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    model = LlamaForCausalLM(_small_config())
    assert unwrap_model(torch.compile(model)) is model
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        assert unwrap_model(DistributedDataParallel(model)) is model
    finally:
        dist.destroy_process_group()


def test_a_local_manifest_refuses_a_model_from_another_path(
    example: Path,  # noqa: F811
    tmp_path: Path,
    tok: Any,
) -> None:
    copy = shutil.copytree(example.parent / "model", tmp_path / "copy")  # the same bytes
    model = AutoModelForCausalLM.from_pretrained(copy)
    err = _refused(_trainer(model, tok, example, tmp_path / "out"))
    [row] = err.report.findings
    assert (row.rule, row.field) == (ORIGIN_RULE, "model.path")
    assert row.expected == str((example.parent / "model").resolve())
    assert row.observed == str(copy.resolve())

    pinned, _ = load_pinned(example)
    trainer = _trainer(pinned, tok, example, tmp_path / "ok")
    trainer.train()
    assert trainer.state.global_step == STEPS


def test_pinned_weights_that_cannot_be_read_refuse(
    example: Path,  # noqa: F811
    tmp_path: Path,
    tok: Any,
) -> None:
    model, _ = load_pinned(example, tokenizer=False)
    weights = example.parent / "model" / "model.safetensors"
    garbage = weights.with_name("garbage")
    garbage.write_bytes(b"\xff" * 64)
    garbage.replace(weights)  # a new file: the loaded model may still map the old one
    err = _refused(_trainer(model, tok, example, tmp_path / "out"))
    [row] = [f for f in err.report.findings if f.rule == WEIGHTS_RULE]
    assert row.observed and row.observed.startswith("not compared: ")


def test_an_in_memory_model_is_refused_unless_tracing_is_turned_off(
    example: Path,  # noqa: F811
    tmp_path: Path,
    tok: Any,
) -> None:
    err = _refused(_trainer(_in_memory(example), tok, example, tmp_path / "no"))
    [row] = err.report.findings
    assert row.rule == ORIGIN_RULE and row.observed and "empty" in row.observed
    assert row.hint and "trace_model=False" in row.hint

    out = tmp_path / "ok"
    trainer = _trainer(_in_memory(example), tok, example, out, trace_model=False)
    trainer.train()
    assert trainer.state.global_step == STEPS
    record = _record(out)
    assert record["status"] == "completed"
    assert record["model_origin"] == {"traced": False, "reason": "trace_model=False"}
    assert any("NOT traced" in w for w in record["warnings"])


def test_the_origin_row_is_accepted_only_with_a_reason_on_record(
    hub: Hub, tmp_path: Path, tok: Any
) -> None:
    hub.move_main(hub.b)
    model = AutoModelForCausalLM.from_pretrained(REPO, local_files_only=True, cache_dir=hub.cache)
    out = tmp_path / "out"
    reason = "B is A re-uploaded; reviewed"
    trainer = _trainer(model, tok, hub.manifest, out, accept={"model.revision": reason})
    trainer.train()
    assert trainer.state.global_step == STEPS
    accepted = _record(out)["accepted"]
    assert [(a["field"], a["reason"]) for a in accepted] == [("model.revision", reason)]
    assert hub.b in accepted[0]["observed"]


def _in_memory(manifest: Path) -> LlamaForCausalLM:
    """A model built in memory from the pinned config (as the guard's config check asks):
    no origin to trace."""
    config = AutoConfig.from_pretrained(manifest.parent / "model")
    config._name_or_path = ""
    return LlamaForCausalLM(config)


def _small_config() -> LlamaConfig:
    return LlamaConfig(
        vocab_size=320,  # the example tokenizer has at most 300 tokens
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
