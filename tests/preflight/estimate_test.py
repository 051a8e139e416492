"""``estimate`` against real models: parameter counts from the config equal
transformers', LoRA counts equal peft's, and the step estimate is within 30% of
the host memory one real CPU step takes (method: ``preflight.estimate``'s
docstring).  Tiny Llama-like (GQA, untied head) and GPT-2-like (tied) models
built from a config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.adapter.architecture import LoraFacts
from ftmanifest.cli import main
from ftmanifest.preflight.estimate import Setup, estimate, levers, with_measured
from ftmanifest.preflight.shapes import UnknownArchitectureError, architecture, read_architecture
from tests.conftest import ROOT

transformers = pytest.importorskip("transformers")

LLAMA = dict(vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)  # fmt: skip
GPT2 = dict(vocab_size=2048, n_embd=256, n_layer=4, n_head=4, n_positions=512, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=1)  # fmt: skip


def _config(arch: str, **over: Any) -> Any:
    if arch == "llama":
        return transformers.LlamaConfig(**{**LLAMA, **over})
    return transformers.GPT2Config(**{**GPT2, **over})


def _folder(tmp_path: Path, arch: str, **over: Any) -> Path:
    folder = tmp_path / arch
    _config(arch, **over).save_pretrained(folder)
    return folder


def _model(config: Any) -> Any:
    if config.model_type == "llama":
        return transformers.LlamaForCausalLM(config)
    return transformers.GPT2LMHeadModel(config)


@pytest.mark.parametrize(
    ("arch", "over"),
    [("llama", {}), ("llama", {"tie_word_embeddings": True, "attention_bias": True}),
     ("llama", {"num_key_value_heads": 1, "head_dim": 32}), ("gpt2", {}),
     ("gpt2", {"n_inner": 300, "tie_word_embeddings": False})],
)  # fmt: skip
def test_parameter_count_from_the_config_is_transformers_count(
    tmp_path: Path, arch: str, over: dict[str, Any]
) -> None:
    model = _model(_config(arch, **over))
    found = read_architecture(_folder(tmp_path, arch, **over))
    assert found.family == arch
    assert found.params == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    ("arch", "targets"),
    [("llama", ["q_proj", "v_proj", "down_proj"]), ("llama", "all-linear"),
     ("llama", None), ("gpt2", ["c_attn", "c_fc"])],
)  # fmt: skip
def test_lora_count_is_peft_count(arch: str, targets: Any) -> None:
    peft = pytest.importorskip("peft")
    config = _config(arch)
    cfg = peft.LoraConfig(r=8, lora_alpha=16, target_modules=targets, task_type="CAUSAL_LM",
                          fan_in_fan_out=arch == "gpt2")  # fmt: skip
    wrapped = peft.get_peft_model(_model(config), cfg)
    facts = LoraFacts(r=8, alpha=16, target_modules=targets)
    est = estimate(architecture(config.to_dict()), Setup(256, 4, method="lora", lora=facts))
    assert est.trainable == wrapped.get_nb_trainable_parameters()[0]


MEASURE = """
import gc, json, sys
import torch
from transformers import AutoConfig, AutoModelForCausalLM
from ftmanifest.preflight.steps import PeakMemory, train_step

folder, seq, mb, checkpointing = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.set_num_threads(1)
torch.manual_seed(0)
config = AutoConfig.from_pretrained(folder)
model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.float32)
model.train()
if checkpointing == "1":
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
x = torch.randint(0, config.vocab_size, (1, 16))
model(input_ids=x, labels=x).loss.backward()  # warm-up: libraries, kernels, thread pools
model.zero_grad(set_to_none=True)
del x
gc.collect()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
def batch():
    ids = torch.randint(0, config.vocab_size, (mb, seq))
    return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids)}
batches = [batch(), batch()]
with PeakMemory(torch.device("cpu")) as peak:
    for _ in range(2):
        train_step(model, optimizer, batches, "per-token")
print(json.dumps({"before": peak.host_before, "peak": peak.host, "method": peak.method}))
"""


def _measure(folder: Path, seq: int, micro_batch: int, checkpointing: bool) -> dict[str, Any]:
    # a fixed mmap threshold: large blocks go back to the OS when freed, so the
    # resident set follows the live tensors instead of glibc's retained heap
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(folder), str(seq), str(micro_batch),
         "1" if checkpointing else "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux VmHWM reset")
@pytest.mark.parametrize(("arch", "checkpointing"), [("llama", False), ("gpt2", False),
                                                     ("llama", True)])  # fmt: skip
def test_step_estimate_is_within_30_percent_of_the_measured_peak(
    tmp_path: Path, arch: str, checkpointing: bool
) -> None:
    pytest.importorskip("torch")
    folder = _folder(tmp_path, arch)
    setup = Setup(seq_len=256, micro_batch=4, checkpointing=checkpointing)
    est = estimate(read_architecture(folder), setup)
    measured = _measure(folder, 256, 4, checkpointing)
    growth = measured["peak"] - measured["before"]
    # the weights are resident at the baseline: compare what the step adds
    step = est.total - est.part("weights")
    print(f"{arch}: estimated step {step / 2**20:.1f} MiB, measured {growth / 2**20:.1f} MiB")
    assert abs(step - growth) <= 0.3 * growth, (step, growth, measured)
    assert with_measured(est, growth + est.part("weights")).error is not None


def _llama_arch() -> Any:
    return architecture({**LLAMA, "model_type": "llama"})


@pytest.mark.parametrize("strategy", ["fsdp", "zero3"])
def test_full_sharding_divides_weights_gradients_and_states_by_world_size(strategy: str) -> None:
    arch = _llama_arch()
    one = estimate(arch, Setup(256, 4))
    four = estimate(arch, Setup(256, 4, strategy=strategy, world_size=4))
    for part in ("weights", "gradients", "optimizer states"):
        assert four.part(part) == -(-one.part(part) // 4)
    assert four.part("activations") == one.part("activations")
    assert four.part("gathered layer") > 0


def test_zero_stages_and_ddp() -> None:
    arch = _llama_arch()
    one = estimate(arch, Setup(256, 4))
    z1 = estimate(arch, Setup(256, 4, strategy="zero1", world_size=4))
    z2 = estimate(arch, Setup(256, 4, strategy="zero2", world_size=4))
    ddp = estimate(arch, Setup(256, 4, strategy="ddp", world_size=4))
    assert z1.part("optimizer states") * 4 == one.part("optimizer states")
    assert z1.part("gradients") == one.part("gradients")
    assert z2.part("gradients") * 4 == one.part("gradients")
    assert z2.part("weights") == one.part("weights")
    assert ddp.part("weights") == one.part("weights")
    assert ddp.part("DDP gradient buckets") == one.part("gradients")


def test_optimizers_and_precision() -> None:
    arch = _llama_arch()
    adam = estimate(arch, Setup(256, 4)).part("optimizer states")
    assert adam == 2 * 4 * arch.params
    assert estimate(arch, Setup(256, 4, optimizer="sgd")).part("optimizer states") == 0
    momentum = estimate(arch, Setup(256, 4, optimizer="sgd_momentum"))
    assert momentum.part("optimizer states") == 4 * arch.params
    eight = estimate(arch, Setup(256, 4, optimizer="adamw_bnb_8bit")).part("optimizer states")
    assert adam / 4 <= eight < adam / 3.5
    bf16 = estimate(arch, Setup(256, 4, precision="bf16"))
    assert bf16.part("activations") * 2 == estimate(arch, Setup(256, 4)).part("activations")
    assert "unknown optimizer" in estimate(arch, Setup(256, 4, optimizer="shampoo")).notes[0]


def test_a_levers_effect_is_the_difference_of_two_estimates() -> None:
    arch = _llama_arch()
    setup = Setup(256, 4)
    base = estimate(arch, setup).total
    by_name = {lv.name: lv for lv in levers(arch, setup)}
    names = list(by_name)
    assert names.index("adapter") < names.index("shorter sequences")
    assert names.index("shorter sequences") < names.index("activation checkpointing")
    assert names[-1].startswith("offload")
    shorter = by_name["shorter sequences"]
    assert shorter.effect == estimate(arch, replace(setup, seq_len=128)).total - base
    ckpt = by_name["activation checkpointing"]
    assert ckpt.effect == estimate(arch, replace(setup, checkpointing=True)).total - base
    assert all(lv.effect is None or lv.effect < 0 for lv in by_name.values())


def test_unknown_architecture_is_refused_without_headers() -> None:
    with pytest.raises(UnknownArchitectureError) as err:
        architecture({"model_type": "mamba", "hidden_size": 8})
    assert "unknown architecture mamba" in err.value.message
    assert err.value.exit_code == 2


def _manifest(tmp_path: Path, training: str) -> Path:
    _folder(tmp_path, "llama")
    path = tmp_path / "exp.yaml"
    path.write_text(
        "ftmanifest: 1\nexperiment: {id: est}\nmodel: {path: llama}\n"
        "method: {kind: lora, r: 8, alpha: 16, target_modules: [q_proj, v_proj]}\n"
        f"training: {training}\ndistributed: {{strategy: zero3, world_size: 4}}\n"
    )
    return path


def test_cli_prints_the_breakdown_and_levers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _manifest(tmp_path, "{seq_len: 256, micro_batch: 4, precision: bf16}")
    assert main(["estimate", str(path)]) == 0
    text = capsys.readouterr().out
    assert "optimizer states" in text and "activation checkpointing" in text
    assert main(["estimate", str(path), "--format", "json", "--seq-len", "128"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["seq_len"] == 128 and data["trainable"] == 4 * 8 * (256 + 256 + 256 + 128)
    assert any(lv["name"] == "shorter sequences" for lv in data["levers"])


def test_cli_refuses_a_lora_target_the_model_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _manifest(tmp_path, "{seq_len: 256, micro_batch: 4}")
    path.write_text(path.read_text().replace("[q_proj, v_proj]", "[q_proj, nope_proj]"))
    assert main(["estimate", str(path)]) == 2
    assert "nope_proj" in capsys.readouterr().err


def test_cli_refuses_a_step_without_a_sequence_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _manifest(tmp_path, "{micro_batch: 4}")
    assert main(["estimate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "training.seq_len" in err and "--seq-len" in err
