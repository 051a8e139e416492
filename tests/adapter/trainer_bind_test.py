"""The Trainer guard binds every adapter checkpoint it saves: a real peft
LoRA model trained by a real ``transformers.Trainer`` for two steps, a checkpoint at
each, every checkpoint bound and accepted by check-adapter; without a key nothing is
signed and the run record says so."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.adapter.check import check_adapter
from tests.adapter.conftest import LORA, TARGETS, copy_tree, trust_repo, write_manifest
from tests.conftest import git

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


class _Tokens:
    """Six sequences of token ids (a torch-free stand-in for a tokenized data set)."""

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> dict[str, Any]:
        import torch

        ids = torch.tensor([1 + i, 2, 3, 4, 5, 6])
        return {"input_ids": ids, "labels": ids}


def _train(project: Path, manifest: Path, out: Path, config: Any = None, **callback: Any) -> Any:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    from ftmanifest.integrations.transformers import FtManifestCallback

    base = AutoModelForCausalLM.from_pretrained(str(project / "base"))
    model = get_peft_model(base, config or LoraConfig(**LORA, target_modules=TARGETS["gpt2"]))
    guard = FtManifestCallback(manifest, signature=False, **callback)
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=2,
        save_strategy="steps",
        save_steps=1,
        per_device_train_batch_size=2,
        use_cpu=True,
        report_to=[],
        disable_tqdm=True,
        logging_strategy="no",
    )
    Trainer(model=model, args=args, train_dataset=_Tokens(), callbacks=[guard]).train()
    return guard


@pytest.fixture
def project(models: dict[str, Path], tmp_path: Path, signer: Any) -> tuple[Path, Path]:
    """A training repository with the base and a locked manifest that exports an adapter."""
    from ftmanifest.verify import verify_manifest
    from ftmanifest.verify.lock import lock_manifest

    root = tmp_path / "project"
    root.mkdir()
    trust_repo(root, signer)
    copy_tree(models["gpt2-a"], root / "base")
    (root / ".gitignore").write_text("out/\n")
    # the guard refuses Trainer options that change training unless pinned
    manifest = write_manifest(root, "base", "gpt2", training={"micro_batch": 2, "max_steps": 2})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base and manifest")
    lock_manifest(manifest)
    git(root, "commit", "-qam", "lock")
    assert verify_manifest(manifest, signature=False).findings == []
    return root, manifest


def test_every_saved_checkpoint_is_bound(project: tuple[Path, Path], signer: Any) -> None:
    root, manifest = project
    guard = _train(root, manifest, root / "out", bind_key=signer)
    checkpoints = sorted((root / "out").glob("checkpoint-*"))
    assert [c.name for c in checkpoints] == ["checkpoint-1", "checkpoint-2"]
    assert [b["path"] for b in guard.bindings] == [str(c) for c in checkpoints]
    for checkpoint in checkpoints:
        assert (checkpoint / "ftmanifest-binding.sig.json").is_file()
        rows = check_adapter(checkpoint, manifest=manifest).findings
        assert not [f for f in rows if f.severity == "error"], rows
    record = json.loads((root / "out" / "ftmanifest-run.json").read_text())
    assert [b["bound"] for b in record["adapter_bindings"]] == [True, True]


def test_without_a_key_nothing_is_signed_and_the_record_says_so(
    project: tuple[Path, Path],
) -> None:
    root, manifest = project
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _train(root, manifest, root / "out")
    assert any("not bound" in str(w.message) for w in caught)
    assert not list((root / "out").glob("checkpoint-*/ftmanifest-binding.sig.json"))
    record = json.loads((root / "out" / "ftmanifest-run.json").read_text())
    assert [b["bound"] for b in record["adapter_bindings"]] == [False, False]


IA3: dict[str, Any] = {
    "target_modules": ["c_attn", "mlp.c_proj"],
    "feedforward_modules": ["mlp.c_proj"],
}


def test_a_declared_ia3_run_is_bound_at_every_save(project: tuple[Path, Path], signer: Any) -> None:
    """The first save of an IA3 run stopped training: bind knew only LoRA."""
    from peft import IA3Config

    from ftmanifest.verify.lock import lock_manifest

    root, manifest = project
    body = json.loads(manifest.read_text())
    body["method"] = {"kind": "peft", "peft_type": "IA3", "config": IA3}
    manifest.write_text(json.dumps(body, indent=2))
    git(root, "commit", "-qam", "the method is IA3")
    lock_manifest(manifest)
    git(root, "commit", "-qam", "lock")
    guard = _train(root, manifest, root / "out", IA3Config(**IA3), bind_key=signer)
    checkpoints = sorted((root / "out").glob("checkpoint-*"))
    assert [b["bound"] for b in guard.bindings] == [True, True]
    for checkpoint in checkpoints:
        rows = check_adapter(checkpoint, manifest=manifest).findings
        assert not [f for f in rows if f.severity == "error"], rows
