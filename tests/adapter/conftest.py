"""Tiny real models and adapters for the adapter tests, built once per worker.

GPT-2-like (Conv1D layers, tied embeddings) and Llama-like bases from configs,
saved with ``save_pretrained``; a LoRA adapter trained one real optimizer step
with peft.  Fixtures are session-scoped: each is built once per xdist worker
and never modified by a test (tests copy what they change).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

LORA: dict[str, Any] = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0}
TARGETS = {"gpt2": ["c_attn", "c_proj"], "llama": ["q_proj", "v_proj"]}


def make_model(arch: str, seed: int) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if arch == "gpt2":
            return GPT2LMHeadModel(
                GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32,
                           bos_token_id=0, eos_token_id=0)
            )  # fmt: skip
        return LlamaForCausalLM(
            LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
                        bos_token_id=0, eos_token_id=0, tie_word_embeddings=False)
        )  # fmt: skip


def save_base(folder: Path, arch: str, seed: int, **kw: Any) -> Path:
    make_model(arch, seed).save_pretrained(str(folder), **kw)
    return folder


def train_adapter(base: Path, folder: Path, arch: str, **lora: Any) -> Path:
    """One real LoRA optimizer step on a few tokens, then save the adapter."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base))
    config = LoraConfig(**{**LORA, "target_modules": TARGETS[arch], **lora})
    peft_model = get_peft_model(model, config)
    params = [p for p in peft_model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
        for _ in range(2):  # lora_B starts at zero: the second step moves lora_A too
            loss = peft_model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
    peft_model.save_pretrained(str(folder))
    return folder


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Bases and adapters, by name: gpt2-a, gpt2-a-sharded, gpt2-b, llama-a,
    gpt2-adapter (trained on gpt2-a), llama-adapter (trained on llama-a)."""
    import transformers

    transformers.logging.set_verbosity_error()
    root = tmp_path_factory.mktemp("models")
    out = {
        "gpt2-a": save_base(root / "gpt2-a", "gpt2", 0),
        "gpt2-a-sharded": save_base(root / "gpt2-a-sharded", "gpt2", 0, max_shard_size="20KB"),
        "gpt2-b": save_base(root / "gpt2-b", "gpt2", 1),
        "llama-a": save_base(root / "llama-a", "llama", 0),
    }
    out["gpt2-adapter"] = train_adapter(out["gpt2-a"], root / "gpt2-adapter", "gpt2")
    out["llama-adapter"] = train_adapter(out["llama-a"], root / "llama-adapter", "llama")
    return out


def write_manifest(
    folder: Path,
    model_dir: str,
    arch: str,
    *,
    training: dict[str, Any] | None = None,
    **method: Any,
) -> Path:
    """A manifest beside a local base folder, its tree digest pinned (``training``: the
    section a guarded Trainer run needs, its options pinned)."""
    from ftmanifest.hashing.tree import hash_tree

    tree = hash_tree(folder / model_dir, use_cache=False).digest
    targets = method.pop("target_modules", TARGETS[arch])
    body = {
        "ftmanifest": 1,
        "experiment": {"id": f"{arch}-lora"},
        "model": {"path": model_dir, "tree_digest": tree},
        "method": {"kind": "lora", "r": LORA["r"], "alpha": LORA["lora_alpha"],
                   "target_modules": targets, **method},
        "export": {"path": "adapter", "bind": ["base_revision", "base_tree_digest",
                                               "manifest_digest"]},
    }  # fmt: skip
    if training is not None:
        body["training"] = training
    import json

    path = folder / "exp.json"
    path.write_text(json.dumps(body, indent=2), encoding="utf-8")
    return path


def trust_repo(folder: Path, *keys: Any) -> None:
    """``folder`` a git repository whose trust file trusts ``keys``."""
    import subprocess

    from ftmanifest.signing.keys import public_key_line

    subprocess.run(["git", "init", "-q", str(folder)], check=True, timeout=30)
    trust = folder / ".ftmanifest" / "allowed_signers"
    trust.parent.mkdir(exist_ok=True)
    lines = [f'dev{i}@example.org namespaces="ftmanifest" {public_key_line(k.public_key(), "t")}'
             for i, k in enumerate(keys)]  # fmt: skip
    trust.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def signer() -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate()


@pytest.fixture(scope="session")
def bound(
    models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, signer: Any
) -> dict[str, Path]:
    """Project folders (git repo + trust file + manifest + base + bound adapter), by arch.

    Tests copy a project before changing anything in it."""
    from ftmanifest.adapter.bind import bind_adapter

    out: dict[str, Path] = {}
    for arch in ("gpt2", "llama"):
        project = tmp_path_factory.mktemp(f"project-{arch}")
        trust_repo(project, signer)
        copy_tree(models[f"{arch}-a"], project / "base")
        copy_tree(models[f"{arch}-adapter"], project / "adapter")
        manifest = write_manifest(project, "base", arch)
        bind_adapter(project / "adapter", manifest, signer)
        out[arch] = project
    return out
