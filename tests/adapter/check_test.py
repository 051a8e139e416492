"""bind and check-adapter on real tiny models with real peft adapters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.adapter.bind import BindRefusedError, bind_adapter
from ftmanifest.adapter.binding import ENVELOPE_NAME, METADATA_KEY, embedded
from ftmanifest.adapter.check import AdapterReport, check_adapter
from ftmanifest.adapter.tensors import read_header


def rules(report: AdapterReport, severity: str = "error") -> set[str]:
    return {f.rule for f in report.findings if f.severity == severity}


def project_copy(bound: dict[str, Path], arch: str, tmp_path: Path) -> Path:
    dst = tmp_path / "p"
    shutil.copytree(bound[arch], dst, symlinks=True)
    return dst


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_bound_adapter_is_accepted_on_its_base(bound: dict[str, Path], arch: str) -> None:
    project = bound[arch]
    report = check_adapter(project / "adapter", manifest=project / "exp.json")
    assert report.ok, report.findings
    assert report.signers == ("dev0@example.org",)
    assert report.binding is not None
    assert report.binding.base_tensor_digest == report.tensor_digest


def test_binding_is_written_three_ways(bound: dict[str, Path]) -> None:
    adapter = bound["gpt2"] / "adapter"
    assert (adapter / ENVELOPE_NAME).is_file()
    meta = read_header(adapter / "adapter_model.safetensors").metadata
    assert meta["format"] == "pt" and METADATA_KEY in meta  # peft's own key is kept
    predicate = embedded(adapter / "adapter_model.safetensors")
    assert predicate is not None and predicate["method"]["r"] == 4
    assert predicate["base"]["tensorDigest"].startswith("sha256-tensors:")
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 4  # peft's fields are kept
    from safetensors import safe_open

    with safe_open(str(adapter / "adapter_model.safetensors"), "np") as f:  # the library reads it
        assert json.loads(f.metadata()[METADATA_KEY]) == predicate


def test_accepts_the_base_resaved_with_another_shard_size(
    bound: dict[str, Path], models: dict[str, Path]
) -> None:
    report = check_adapter(
        bound["gpt2"] / "adapter",
        base_dir=models["gpt2-a-sharded"],
        trust_path=bound["gpt2"] / ".ftmanifest" / "allowed_signers",
    )
    assert report.ok and report.findings == []


def test_refuses_another_base_of_the_same_architecture(
    bound: dict[str, Path], models: dict[str, Path]
) -> None:
    report = check_adapter(
        bound["gpt2"] / "adapter",
        base_dir=models["gpt2-b"],
        trust_path=bound["gpt2"] / ".ftmanifest" / "allowed_signers",
    )
    assert rules(report) == {"adapter.base-weights-differ"}


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.write_bytes(bytes(data))


def test_refuses_the_base_with_one_changed_weight(bound: dict[str, Path], tmp_path: Path) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    weights = project / "base" / "model.safetensors"
    _flip(weights, read_header(weights).tensors[-1].begin)
    report = check_adapter(project / "adapter", base_dir=project / "base")
    assert rules(report) == {"adapter.base-weights-differ"}


def test_refuses_the_adapter_after_one_byte_changed(bound: dict[str, Path], tmp_path: Path) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    weights = project / "adapter" / "adapter_model.safetensors"
    _flip(weights, read_header(weights).tensors[0].begin + 2)
    report = check_adapter(project / "adapter", manifest=project / "exp.json")
    assert rules(report) == {"adapter.files-changed"}
    assert [f.field for f in report.findings] == ["adapter_model.safetensors"]


def test_refuses_an_added_file(bound: dict[str, Path], tmp_path: Path) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    (project / "adapter" / "extra.bin").write_bytes(b"x")
    report = check_adapter(project / "adapter", manifest=project / "exp.json")
    assert rules(report) == {"adapter.files-changed"}


def test_refuses_a_binding_signed_by_an_untrusted_key(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ftmanifest.adapter.binding import Binding
    from ftmanifest.adapter.signed import sign_binding

    project = project_copy(bound, "gpt2", tmp_path)
    report = check_adapter(project / "adapter", manifest=project / "exp.json")
    assert report.binding is not None
    stranger = Ed25519PrivateKey.generate()
    sign_binding(project / "adapter", Binding(**vars(report.binding)), stranger)
    refused = check_adapter(project / "adapter", manifest=project / "exp.json")
    assert rules(refused) == {"adapter.binding-untrusted"}
    assert refused.findings[0].extra["reason"] == "unknown-key"


def test_refuses_an_unbound_adapter(models: dict[str, Path]) -> None:
    report = check_adapter(models["gpt2-adapter"], base_dir=models["gpt2-a"])
    assert rules(report) == {"adapter.binding-missing"}


def test_refuses_a_missing_target_module_and_a_shape_that_does_not_fit(
    bound: dict[str, Path], models: dict[str, Path]
) -> None:
    trust = bound["gpt2"] / ".ftmanifest" / "allowed_signers"
    on_llama = check_adapter(
        bound["gpt2"] / "adapter", base_dir=models["llama-a"], trust_path=trust
    )
    assert {"adapter.target-missing", "adapter.base-weights-differ"} <= rules(on_llama)
    assert any(f.observed == "c_attn" for f in on_llama.findings)


def test_refuses_lora_shapes_that_do_not_fit(bound: dict[str, Path], tmp_path: Path) -> None:
    wide = tmp_path / "wide"
    make_wide(wide)
    report = check_adapter(
        bound["llama"] / "adapter",
        base_dir=wide,
        trust_path=bound["llama"] / ".ftmanifest" / "allowed_signers",
    )
    assert "adapter.shape-mismatch" in rules(report)


def make_wide(folder: Path) -> None:
    """A Llama-like base with a wider hidden size: same module names, other shapes."""
    from transformers import LlamaConfig, LlamaForCausalLM

    LlamaForCausalLM(
        LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
                    tie_word_embeddings=False)
    ).save_pretrained(str(folder))  # fmt: skip


def test_refuses_r_alpha_and_targets_other_than_the_manifest(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    from tests.adapter.conftest import write_manifest

    project = project_copy(bound, "llama", tmp_path)
    other = write_manifest(project, "base", "llama", target_modules=["q_proj"])
    body = json.loads(other.read_text())
    body["method"].update(r=8, alpha=16)
    other.write_text(json.dumps(body))
    report = check_adapter(project / "adapter", manifest=other)
    fields = {f.field for f in report.findings if f.rule == "adapter.method-differs"}
    assert fields == {"method.r", "method.alpha", "method.target_modules"}
    assert "adapter.manifest-differs" in rules(report)  # export.bind asks for it


def test_refuses_smuggled_full_weights(bound: dict[str, Path], tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    project = project_copy(bound, "llama", tmp_path)
    weights = project / "adapter" / "adapter_model.safetensors"
    tensors: dict[str, Any] = load_file(str(weights))
    base = load_file(str(project / "base" / "model.safetensors"))
    tensors["base_model.model.model.layers.0.mlp.up_proj.weight"] = base[
        "model.layers.0.mlp.up_proj.weight"
    ]
    del tensors["base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"]
    save_file(tensors, str(weights))
    report = check_adapter(project / "adapter", base_dir=project / "base")
    assert {"adapter.unexpected-tensor", "adapter.missing-tensor",
            "adapter.files-changed"} <= rules(report)  # fmt: skip


def test_bind_refuses_a_drifted_base(bound: dict[str, Path], tmp_path: Path, signer: Any) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    (project / "base" / "config.json").write_text("{}")
    with pytest.raises(BindRefusedError) as info:
        bind_adapter(project / "adapter", project / "exp.json", signer)
    assert info.value.exit_code == 1
    assert {f.rule for f in info.value.findings} == {"adapter.base-drifted"}


def test_the_bound_adapter_scans_clean(bound: dict[str, Path]) -> None:
    """Digests in the safetensors metadata are not taken for secrets."""
    from ftmanifest.scan.engine import ScanOptions, scan_paths

    found = scan_paths([bound["gpt2"] / "adapter"], ScanOptions())
    assert [f for f in found.findings if f.severity != "info"] == []


def test_refuses_an_unsigned_and_a_garbled_binding(bound: dict[str, Path], tmp_path: Path) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    envelope = project / "adapter" / ENVELOPE_NAME
    doc = json.loads(envelope.read_text())
    envelope.write_text(json.dumps({**doc, "signatures": []}))
    report = check_adapter(project / "adapter", manifest=project / "exp.json")
    assert rules(report) == {"adapter.binding-unsigned"}
    envelope.write_text("{not json")
    report = check_adapter(project / "adapter", manifest=project / "exp.json")
    assert rules(report) == {"adapter.binding-malformed"}
    assert report.findings[0].extra["reason"] == "malformed-envelope"
