"""An adapter bound after ``train()`` returns (``trainer.save_model`` calls no
callback, so the script calls ``guard.bind(folder)``) is recorded in the run
record and in the ledger attempt, as the checkpoints the guard saw are."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.ledger import Ledger, ledger_dir
from ftmanifest.ledger.attempts import attempts, find
from tests.adapter.conftest import LORA, TARGETS
from tests.adapter.trainer_bind_test import _Tokens, project

__all__ = ["project"]

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _trained(root: Path, manifest: Path, **callback: Any) -> tuple[Any, Any]:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    from ftmanifest.integrations.transformers import FtManifestCallback

    base = AutoModelForCausalLM.from_pretrained(str(root / "base"))
    model = get_peft_model(base, LoraConfig(**LORA, target_modules=TARGETS["gpt2"]))
    guard = FtManifestCallback(manifest, signature=False, **callback)
    args = TrainingArguments(
        output_dir=str(root / "out"), max_steps=2, save_strategy="no",
        per_device_train_batch_size=2, use_cpu=True, report_to=[], disable_tqdm=True,
        logging_strategy="no",
    )  # fmt: skip
    trainer = Trainer(model=model, args=args, train_dataset=_Tokens(), callbacks=[guard])
    trainer.train()
    return trainer, guard


def _attempt(manifest: Path, attempt_id: str) -> Any:
    (attempt,) = find(attempts(Ledger(ledger_dir(manifest)).read().entries), attempt_id)
    return attempt


def test_an_adapter_bound_after_save_model_is_in_the_attempt(
    project: tuple[Path, Path], signer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from ftmanifest.cli import main

    root, manifest = project
    trainer, guard = _trained(root, manifest, bind_key=signer)
    final = root / "out" / "final"
    trainer.save_model(str(final))
    entry = guard.bind(final)
    assert entry["bound"] is True and (final / "ftmanifest-binding.sig.json").is_file()

    record = json.loads((root / "out" / "ftmanifest-run.json").read_text())
    assert record["status"] == "completed"
    assert [b["path"] for b in record["adapter_bindings"]] == [str(final)]
    attempt = _attempt(manifest, record["attempt"])
    assert attempt.status == "completed"
    (bound,) = attempt.to_dict()["adapter_bindings"]
    assert bound["path"] == str(final) and bound["bound"] is True
    assert bound["base_tensor_digest"].startswith("sha256-tensors:")

    capsys.readouterr()
    assert main(["ledger", "show", record["attempt"], "--manifest", str(manifest)]) == 0
    assert f"adapter {final}  bound" in capsys.readouterr().out


def test_an_unbound_adapter_after_save_model_is_recorded_as_unbound(
    project: tuple[Path, Path],
) -> None:
    root, manifest = project
    trainer, guard = _trained(root, manifest)
    final = root / "out" / "final"
    trainer.save_model(str(final))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        guard.bind(final)
    record = json.loads((root / "out" / "ftmanifest-run.json").read_text())
    (unbound,) = _attempt(manifest, record["attempt"]).adapter_bindings
    assert unbound["path"] == str(final) and unbound["bound"] is False
    assert "bind_key" in unbound["reason"]


def test_the_guard_binds_with_an_ecdsa_key_file_and_writes_model_sig(
    project: tuple[Path, Path], tmp_path: Path
) -> None:
    """An ECDSA P-256 key file given as bind_key signs the binding, and the adapter
    also gets model.sig, which model-signing's own verifier accepts."""
    pytest.importorskip("model_signing")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from model_signing import verifying

    key = ec.generate_private_key(ec.SECP256R1())
    key_path = tmp_path / "publisher.pem"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    public_pem = tmp_path / "publisher.pub.pem"
    public_pem.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    root, manifest = project
    trainer, guard = _trained(root, manifest, bind_key=str(key_path))
    final = root / "out" / "final"
    trainer.save_model(str(final))
    entry = guard.bind(final)
    assert entry["bound"] is True and (final / "ftmanifest-binding.sig.json").is_file()
    assert entry["model_sig"] == str(final / "model.sig")
    config = verifying.Config().use_elliptic_key_verifier(public_key=public_pem)
    config.verify(final, final / "model.sig")  # raises when it does not hold
    (final / "adapter_config.json").write_text("{}")
    with pytest.raises(ValueError):
        config.verify(final, final / "model.sig")
