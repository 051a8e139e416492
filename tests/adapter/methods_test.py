"""bind and check-adapter for what LoRA is not: other PEFT methods declared
under ``method.kind: peft`` are bound by their config, another method than the
manifest's is one plain sentence (never LoRA rows), and LoRA settings that change the
computation (layer_replication, an OLoRA init) are refused unless the manifest states them."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.adapter.bind import BindRefusedError, bind_adapter
from ftmanifest.adapter.check import check_adapter
from ftmanifest.findings import Finding
from tests.adapter.conftest import copy_tree, make_model, trust_repo, write_manifest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

IA3: dict[str, Any] = {
    "target_modules": ["q_proj", "v_proj", "down_proj"],
    "feedforward_modules": ["down_proj"],
}


def _save(folder: Path, config: Any, arch: str = "llama") -> Path:
    """A real peft adapter of ``config`` on the tiny base, saved as peft saves it."""
    from peft import get_peft_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        get_peft_model(make_model(arch, 0), config).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def adapters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from peft import IA3Config, LoraConfig, PromptTuningConfig

    root = tmp_path_factory.mktemp("methods")
    lora: dict[str, Any] = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    return {
        "ia3": _save(root / "ia3", IA3Config(**IA3)),
        "prompt": _save(root / "prompt", PromptTuningConfig(task_type="CAUSAL_LM",
                                                            num_virtual_tokens=4)),
        "replicated": _save(root / "replicated",
                            LoraConfig(**lora, layer_replication=[(0, 2), (1, 2)])),
        "olora": _save(root / "olora", LoraConfig(**lora, init_lora_weights="olora")),
    }  # fmt: skip


def _project(models: dict[str, Path], adapter: Path, tmp: Path, signer: Any,
             method: dict[str, Any] | None = None, **lora: Any) -> Path:  # fmt: skip
    """A project with the Llama base, ``adapter`` and a manifest whose method is
    ``method`` (else LoRA r=4/alpha=8 on q_proj, v_proj with ``lora``)."""
    trust_repo(tmp, signer)
    copy_tree(models["llama-a"], tmp / "base")
    copy_tree(adapter, tmp / "adapter")
    manifest = write_manifest(tmp, "base", "llama", **lora)
    if method is not None:
        body = json.loads(manifest.read_text())
        body["method"] = method
        manifest.write_text(json.dumps(body))
    return manifest


def _refusal(adapter: Path, manifest: Path, signer: Any) -> list[Finding]:
    with pytest.raises(BindRefusedError) as info:
        bind_adapter(adapter, manifest, signer)
    assert not (adapter / "ftmanifest-binding.sig.json").exists()
    return [f for f in info.value.findings if f.severity == "error"]


def _complete(f: Finding) -> None:
    assert f.path and f.field and f.expected and f.observed and f.hint, f


def test_ia3_declared_under_kind_peft_binds_and_checks(
    models: dict[str, Path], adapters: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    """An IA3 adapter got LoRA rows ("the adapter lacks ...lora_A.weight") and could
    not be bound at all."""
    method = {"kind": "peft", "peft_type": "IA3", "config": IA3}
    manifest = _project(models, adapters["ia3"], tmp_path, signer, method)
    result = bind_adapter(tmp_path / "adapter", manifest, signer)
    assert result.binding.method["kind"] == "peft"
    assert result.binding.method["peft_type"] == "IA3"
    assert result.binding.method["config_digest"].startswith("sha256-peft-config:")
    report = check_adapter(tmp_path / "adapter", manifest=manifest)
    assert report.ok, report.findings


def test_ia3_with_another_config_is_refused_by_key(
    models: dict[str, Path], adapters: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    config = {**IA3, "feedforward_modules": ["up_proj"], "init_ia3_weights": False}
    method = {"kind": "peft", "peft_type": "IA3", "config": config}
    manifest = _project(models, adapters["ia3"], tmp_path, signer, method)
    rows = _refusal(tmp_path / "adapter", manifest, signer)
    assert {f.field for f in rows} == {"method.config.feedforward_modules",
                                       "method.config.init_ia3_weights"}  # fmt: skip
    for f in rows:
        _complete(f)


@pytest.mark.parametrize("name", ["ia3", "prompt"])
def test_another_method_under_kind_lora_is_one_plain_sentence(
    models: dict[str, Path], adapters: dict[str, Path], tmp_path: Path, signer: Any, name: str
) -> None:
    manifest = _project(models, adapters[name], tmp_path, signer)
    (row,) = _refusal(tmp_path / "adapter", manifest, signer)
    peft_type = {"ia3": "IA3", "prompt": "PROMPT_TUNING"}[name]
    assert row.message == (
        "check-adapter binds LoRA adapters and declared PEFT methods; this adapter is "
        f"{peft_type} and the manifest declares LoRA (method.kind: lora)"
    )
    assert row.field == "method.kind" and f"peft_type: {peft_type}" in (row.hint or "")
    _complete(row)
    report = check_adapter(tmp_path / "adapter", manifest=manifest)
    assert [f.rule for f in report.findings if f.severity == "error"] == [
        "adapter.binding-missing", "adapter.method-differs"]  # fmt: skip
    assert not any("lora" in f.message.lower() and f is not row for f in report.findings
                   if f.rule != "adapter.method-differs")  # fmt: skip


def test_a_lora_adapter_under_full_fine_tuning_names_both(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    project = shutil.copytree(bound["llama"], tmp_path / "p")
    body = json.loads((project / "exp.json").read_text())
    body["method"] = {"kind": "full"}
    (project / "exp.json").write_text(json.dumps(body))
    report = check_adapter(project / "adapter", manifest=project / "exp.json")
    (row,) = [f for f in report.findings if f.rule == "adapter.method-differs"]
    assert row.message.endswith("this adapter is LORA and the manifest declares full "
                                "fine-tuning (method.kind: full)")  # fmt: skip


def test_an_ia3_adapter_checked_without_a_manifest_gets_no_lora_rows(
    models: dict[str, Path], adapters: dict[str, Path]
) -> None:
    report = check_adapter(adapters["ia3"], base_dir=models["llama-a"])
    assert {f.rule for f in report.findings if f.severity == "error"} == {
        "adapter.binding-missing"}  # fmt: skip


def test_an_ia3_adapter_on_another_architecture_is_refused(
    models: dict[str, Path], adapters: dict[str, Path]
) -> None:
    report = check_adapter(adapters["ia3"], base_dir=models["gpt2-a"])
    rows = [f for f in report.findings if f.rule == "adapter.target-missing"]
    assert rows and "model.layers.0" in str(rows[0].observed)


def test_a_prompt_tuning_adapter_declared_binds(
    models: dict[str, Path], adapters: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    method = {"kind": "peft", "peft_type": "PROMPT_TUNING", "config": {"num_virtual_tokens": 4}}
    manifest = _project(models, adapters["prompt"], tmp_path, signer, method)
    bind_adapter(tmp_path / "adapter", manifest, signer)
    assert check_adapter(tmp_path / "adapter", manifest=manifest).ok


# OLoRA, even declared, is refused: peft rewrites the base on load (binding_attacks_test)
@pytest.mark.parametrize(
    ("name", "field", "declared"),
    [("replicated", "method.layer_replication", {"layer_replication": [[0, 2], [1, 2]]})],
)  # fmt: skip
def test_a_setting_that_changes_computation_must_be_declared(
    models: dict[str, Path], adapters: dict[str, Path], tmp_path: Path, signer: Any,
    name: str, field: str, declared: dict[str, Any],
) -> None:  # fmt: skip
    manifest = _project(models, adapters[name], tmp_path / "no", signer)
    rows = _refusal(tmp_path / "no" / "adapter", manifest, signer)
    assert field in {f.field for f in rows}, rows
    for f in rows:
        _complete(f)
    manifest = _project(models, adapters[name], tmp_path / "yes", signer, **declared)
    result = bind_adapter(tmp_path / "yes" / "adapter", manifest, signer)
    assert result.binding.method[field.removeprefix("method.")] in (
        declared[field.removeprefix("method.")], [[0, 2], [1, 2]])  # fmt: skip
    assert check_adapter(tmp_path / "yes" / "adapter", manifest=manifest).ok


def test_an_unknown_setting_of_the_adapter_is_refused(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    """A key this tool does not know, set to something, is never a silent pass."""
    import shutil

    project = shutil.copytree(bound["llama"], tmp_path / "p")
    shutil.rmtree(project / "adapter")
    adapter = copy_tree(models["llama-adapter"], project / "adapter")
    path = adapter / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "lora_future_knob": 3}))
    rows = _refusal(adapter, project / "exp.json", signer)
    assert [f.field for f in rows] == ["method.lora_future_knob"]


def test_a_binding_signed_before_the_new_fields_still_reads(
    bound: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    """An old predicate (method without exclude_modules, patterns, init, ...) is read,
    its missing fields peft's defaults, and the adapter still checks."""
    import shutil

    from ftmanifest.adapter.binding import METHOD_FIELDS, Binding, bound_method
    from ftmanifest.adapter.signed import sign_binding

    project = shutil.copytree(bound["llama"], tmp_path / "p")
    report = check_adapter(project / "adapter", manifest=project / "exp.json")
    assert report.binding is not None
    old = {k: v for k, v in report.binding.method.items()
           if k in ("kind", "r", "alpha", "dropout", "target_modules", "modules_to_save",
                    "bias", "use_rslora", "use_dora")}  # fmt: skip
    sign_binding(project / "adapter", Binding(**{**vars(report.binding), "method": old}), signer)
    again = check_adapter(project / "adapter", manifest=project / "exp.json")
    assert again.ok, again.findings
    assert again.binding is not None
    facts = bound_method(again.binding)
    assert set(METHOD_FIELDS) <= set(facts)
    assert (facts["rank_pattern"], facts["init"], facts["layer_replication"]) == ({}, True, None)


def test_load_bound_loads_a_declared_ia3_adapter(
    models: dict[str, Path], adapters: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    from ftmanifest.adapter import load_bound

    method = {"kind": "peft", "peft_type": "IA3", "config": IA3}
    manifest = _project(models, adapters["ia3"], tmp_path, signer, method)
    bind_adapter(tmp_path / "adapter", manifest, signer)
    model = load_bound(tmp_path / "adapter", manifest=manifest)
    assert model.peft_config["default"].peft_type == "IA3"


def test_bind_prints_the_declared_method_not_lora_fields(
    models: dict[str, Path], adapters: dict[str, Path], tmp_path: Path, signer: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from cryptography.hazmat.primitives import serialization

    from ftmanifest.cli import main

    method = {"kind": "peft", "peft_type": "IA3", "config": IA3}
    manifest = _project(models, adapters["ia3"], tmp_path, signer, method)
    key = tmp_path / "signer.key"
    key.write_bytes(signer.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.OpenSSH,
                                         serialization.NoEncryption()))  # fmt: skip
    key.chmod(0o600)
    assert main(["bind", str(tmp_path / "adapter"), "--manifest", str(manifest),
                 "--key", str(key)]) == 0  # fmt: skip
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("method:")]
    assert line.split()[1] == "IA3" and "sha256-peft-config:" in line and "r=" not in line
