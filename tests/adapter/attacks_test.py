"""Attacks on ``check-adapter`` and ``load_bound``: each tries to get an OK for
an adapter or base that is not what would be loaded.  Every one must end in a refusal (exit 1)
or unusable input (exit 2), with a finding that names the file, the field,
expected, observed and a fix -- never exit 0.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.adapter import AdapterRefusedError, load_bound
from ftmanifest.adapter.bind import BindRefusedError, bind_adapter
from ftmanifest.adapter.binding import ENVELOPE_NAME, METADATA_KEY
from ftmanifest.adapter.check import check_adapter
from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from tests.adapter.conftest import copy_tree, make_model

ADAPTER = "adapter_model.safetensors"


def project_copy(bound: dict[str, Path], arch: str, tmp_path: Path) -> Path:
    return shutil.copytree(bound[arch], tmp_path / "p", symlinks=True)


def verdict(project: Path, **kw: Any) -> tuple[int, list[Finding]]:
    """(exit code, findings) of checking the project's adapter, as the CLI maps them."""
    if "base_dir" not in kw:
        kw["manifest_path"] = project / "exp.json"
    kw.setdefault("trust_path", project / ".ftmanifest" / "allowed_signers")
    try:
        report = check_adapter(project / "adapter", **kw)
    except FtManifestError as exc:
        assert exc.exit_code == 2, exc
        return 2, list(getattr(exc, "findings", None) or [])
    return (0 if report.ok else 1), report.findings


def errors(findings: list[Finding]) -> list[Finding]:
    out = [f for f in findings if f.severity == "error"]
    for f in out:  # every refusal says where, what, and how to fix it
        assert f.path and f.field and f.expected and f.observed and f.hint, f
    return out


def refused(project: Path, rule: str, **kw: Any) -> list[Finding]:
    code, found = verdict(project, **kw)
    assert code == 1, found
    hits = [f for f in errors(found) if f.rule == rule]
    assert hits, found
    return hits


# --- 1. files added after binding -----------------------------------------


@pytest.mark.parametrize(
    "name",
    ["adapter_model.bin", "second.safetensors", "tokenizer.json", "modeling_evil.py", "README.md",
     "sub/adapter_model.safetensors"],
)  # fmt: skip
def test_a_file_added_after_binding_is_refused(
    bound: dict[str, Path], tmp_path: Path, name: str
) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    added = project / "adapter" / name
    added.parent.mkdir(exist_ok=True)
    shutil.copy(project / "adapter" / ADAPTER, added)
    (hit,) = refused(project, "adapter.files-changed")
    assert hit.field == name and hit.observed.endswith(" bytes")  # refused unread


def test_bind_refuses_weights_peft_may_load_instead(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    """adapter_model.bin beside the safetensors: peft loads it with
    use_safetensors=False, and nothing judged it; a second safetensors file is
    not what peft loads either."""
    for extra in ("adapter_model.bin", "other.safetensors"):
        project = project_copy(bound, "gpt2", tmp_path / extra)
        adapter = project / "adapter"
        shutil.rmtree(adapter)
        copy_tree(models["gpt2-adapter"], adapter)
        shutil.copy(adapter / ADAPTER, adapter / extra)
        with pytest.raises(BindRefusedError) as info:
            bind_adapter(adapter, project / "exp.json", signer)
        rules = {f.rule for f in info.value.findings}
        assert "adapter.unjudged-weights" in rules, info.value.findings
        assert not (adapter / ENVELOPE_NAME).exists()


# --- 2. symlinks, loops, FIFOs ---------------------------------------------


def test_a_link_to_an_identical_copy_inside_is_the_same_file(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    adapter = project / "adapter"
    (adapter / "store").mkdir()
    os.replace(adapter / ADAPTER, adapter / "store" / "w")
    (adapter / ADAPTER).symlink_to("store/w")
    (hit,) = refused(project, "adapter.files-changed")  # a new file: store/w
    assert hit.field == "store/w"


def test_a_link_to_a_file_outside_is_refused(bound: dict[str, Path], tmp_path: Path) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    outside = tmp_path / "elsewhere.safetensors"
    os.replace(project / "adapter" / ADAPTER, outside)
    (project / "adapter" / ADAPTER).symlink_to(outside)
    code, _ = verdict(project)
    assert code in (1, 2)


def test_a_link_loop_is_refused(bound: dict[str, Path], tmp_path: Path) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    (project / "adapter" / ADAPTER).unlink()
    (project / "adapter" / ADAPTER).symlink_to(ADAPTER)
    code, _ = verdict(project)
    assert code in (1, 2)


def _within(seconds: float, fn: Any) -> Any:
    """``fn()``, failing the test (not hanging it) if it blocks."""
    box: list[Any] = []
    worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "blocked"
    return box[0]


def test_a_fifo_named_like_the_adapter_does_not_block(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    (project / "adapter" / ADAPTER).unlink()
    os.mkfifo(project / "adapter" / ADAPTER)
    code, found = _within(20, lambda: verdict(project))
    assert code in (1, 2)
    if code == 1:
        assert any(f.field == ADAPTER for f in errors(found))


# --- 3. replay --------------------------------------------------------------


def test_an_envelope_replayed_onto_another_adapter_is_refused(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    """Adapter Y (same base, other weights) with X's signed binding copied in."""
    project = project_copy(bound, "gpt2", tmp_path)
    x_envelope = (project / "adapter" / ENVELOPE_NAME).read_bytes()
    shutil.rmtree(project / "adapter")
    y = copy_tree(models["gpt2-adapter"], project / "adapter")
    data = bytearray((y / ADAPTER).read_bytes())
    data[-5] ^= 0x40
    (y / ADAPTER).write_bytes(bytes(data))
    (y / ENVELOPE_NAME).write_bytes(x_envelope)
    hits = refused(project, "adapter.files-changed")
    assert {h.field for h in hits} >= {ADAPTER}


# --- 4. adapter_config.json edits -----------------------------------------


@pytest.mark.parametrize(
    "edit",
    [{"base_model_name_or_path": "gpt2"}, {"revision": "0" * 40},
     {"target_modules": ["c_attn"]}, {"modules_to_save": ["lm_head"]},
     {"rank_pattern": {"c_attn": 2}}, {"alpha_pattern": {"c_attn": 64}}, {"use_dora": True},
     {"layers_to_transform": [0]}, {"fan_in_fan_out": False}, {"inference_mode": False}],
)  # fmt: skip
def test_a_config_edit_after_binding_is_refused(
    bound: dict[str, Path], tmp_path: Path, edit: dict[str, Any]
) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    path = project / "adapter" / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **edit}))
    hits = refused(project, "adapter.files-changed")
    assert [h.field for h in hits] == ["adapter_config.json"]


def test_a_duplicate_key_appended_after_binding_is_refused(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    path = project / "adapter" / "adapter_config.json"
    path.write_text(path.read_text().rstrip().removesuffix("}") + ', "lora_alpha": 800}\n')
    code, _ = verdict(project)
    assert code in (1, 2)


@pytest.mark.parametrize(
    "edit",
    [{"rank_pattern": {"c_attn": 2}}, {"alpha_pattern": {"c_attn": 64}},
     {"layers_to_transform": [0]}, {"layers_pattern": "h"}, {"use_dora": True}],
)  # fmt: skip
def test_bind_refuses_lora_settings_the_manifest_does_not_state(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path, signer: Any,
    edit: dict[str, Any],
) -> None:  # fmt: skip
    """peft honours these; a manifest with plain r/alpha does not describe them."""
    project = project_copy(bound, "gpt2", tmp_path)
    shutil.rmtree(project / "adapter")
    adapter = copy_tree(models["gpt2-adapter"], project / "adapter")
    path = adapter / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **edit}))
    with pytest.raises(BindRefusedError):
        bind_adapter(adapter, project / "exp.json", signer)


def test_bind_refuses_a_config_with_duplicate_keys(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path, signer: Any
) -> None:
    """First-wins and last-wins readers would see two different methods."""
    project = project_copy(bound, "gpt2", tmp_path)
    shutil.rmtree(project / "adapter")
    adapter = copy_tree(models["gpt2-adapter"], project / "adapter")
    path = adapter / "adapter_config.json"
    path.write_text(path.read_text().rstrip().removesuffix("}") + ', "r": 4}\n')
    with pytest.raises(FtManifestError) as info:
        bind_adapter(adapter, project / "exp.json", signer)
    assert info.value.exit_code == 2 and "duplicate" in info.value.message


# --- 5. the base side -------------------------------------------------------


def _base_from(models: dict[str, Path], tmp_path: Path, name: str = "gpt2-a") -> Path:
    return copy_tree(models[name], tmp_path / "base")


def test_a_tensor_in_two_indexed_shards_is_unusable(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    base = _base_from(models, tmp_path, "gpt2-a-sharded")
    index = json.loads((base / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    from safetensors.numpy import load_file, save_file

    first, second = load_file(str(base / shards[0])), load_file(str(base / shards[1]))
    name = next(iter(first))
    second[name] = first[name] * 2
    save_file(second, str(base / shards[1]), metadata={"format": "pt"})
    code, _ = verdict(bound["gpt2"], base_dir=base)
    assert code == 2


def test_a_stray_shard_outside_the_index_is_not_loaded(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    """transformers loads only the shards the index names: the OK is true."""
    base = _base_from(models, tmp_path, "gpt2-a-sharded")
    shutil.copy(models["gpt2-b"] / "model.safetensors", base / "stray.safetensors")
    code, found = verdict(bound["gpt2"], base_dir=base)
    assert code == 0, found


def test_model_safetensors_beside_an_index_is_what_transformers_loads(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    """Index and shards are A; model.safetensors (B) wins in transformers."""
    base = _base_from(models, tmp_path, "gpt2-a-sharded")
    shutil.copy(models["gpt2-b"] / "model.safetensors", base / "model.safetensors")
    refused(bound["gpt2"], "adapter.base-weights-differ", base_dir=base)


def test_a_base_transformers_would_load_from_a_pickle_is_refused(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    """A's weights under another safetensors name, B as pytorch_model.bin."""
    base = _base_from(models, tmp_path)
    os.replace(base / "model.safetensors", base / "weights.safetensors")
    import torch

    torch.save(make_model("gpt2", 1).state_dict(), base / "pytorch_model.bin")
    code, found = verdict(bound["gpt2"], base_dir=base)
    assert code in (1, 2), found


def test_pickle_weights_beside_the_safetensors_are_refused(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    """transformers loads them with use_safetensors=False: the digest proves nothing then."""
    base = _base_from(models, tmp_path)
    (base / "pytorch_model.bin").write_bytes(b"not judged")
    (hit,) = refused(bound["gpt2"], "adapter.base-unjudged-weights", base_dir=base)
    assert hit.observed == "pytorch_model.bin"


def test_config_transformers_weights_naming_another_file_is_followed(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    base = _base_from(models, tmp_path)
    shutil.copy(models["gpt2-b"] / "model.safetensors", base / "other.safetensors")
    cfg = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(
        json.dumps({**cfg, "transformers_weights": "other.safetensors"})
    )
    (hit,) = refused(bound["gpt2"], "adapter.base-weights-differ", base_dir=base)
    assert hit.field == "base.tensorDigest"
    assert "adapter.base-config-differs" in {f.rule for f in errors(verdict(bound["gpt2"],
                                                                   base_dir=base)[1])}  # fmt: skip


@pytest.mark.parametrize(
    "edit",
    [{"tie_word_embeddings": True}, {"dtype": "bfloat16"},
     {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}, {"rms_norm_eps": 0.5}],
)  # fmt: skip
def test_a_base_config_that_differs_with_the_same_weights_is_refused(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path, edit: dict[str, Any]
) -> None:
    base = _base_from(models, tmp_path, "llama-a")
    cfg = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps({**cfg, **edit}))
    (hit,) = refused(bound["llama"], "adapter.base-config-differs", base_dir=base)
    assert hit.field == "base.configDigest"


def test_the_base_config_resaved_in_another_key_order_is_the_same(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    base = _base_from(models, tmp_path, "llama-a")
    cfg = json.loads((base / "config.json").read_text())
    cfg["transformers_version"] = "0.0.1"
    (base / "config.json").write_text(json.dumps(dict(reversed(cfg.items()))))
    code, found = verdict(bound["llama"], base_dir=base)
    assert code == 0, found


# --- 6. the embedded binding is not authoritative ---------------------------


def test_an_edited_metadata_binding_is_refused(bound: dict[str, Path], tmp_path: Path) -> None:
    from ftmanifest.adapter.binding import write_metadata
    from ftmanifest.adapter.tensors import read_header

    project = project_copy(bound, "gpt2", tmp_path)
    path = project / "adapter" / ADAPTER
    pred = json.loads(read_header(path).metadata[METADATA_KEY])
    pred["base"]["tensorDigest"] = "sha256-tensors:" + "0" * 64
    write_metadata(path, {METADATA_KEY: json.dumps(pred)})
    (hit,) = refused(project, "adapter.files-changed")
    assert hit.field == ADAPTER


# --- 7. files changing underneath -----------------------------------------


def test_a_shard_truncated_while_it_is_hashed_is_an_error(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from ftmanifest.adapter import tensors

    base = _base_from(models, tmp_path)
    real = tensors._stream

    def truncate_first(fh: Any, header: Any) -> list[str]:
        os.truncate(header.path, header.data_start + 16)
        return real(fh, header)

    monkeypatch.setattr(tensors, "_stream", truncate_first)
    code, _ = verdict(bound["gpt2"], base_dir=base, use_cache=False)
    assert code == 2


def test_a_shard_rewritten_while_it_is_hashed_is_an_error(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from ftmanifest.adapter import tensors

    base = _base_from(models, tmp_path)
    real = tensors._stream

    def rewrite_first(fh: Any, header: Any) -> list[str]:
        with open(header.path, "r+b") as out:
            out.seek(header.data_start)
            out.write(b"\1" * 8)
        return real(fh, header)

    monkeypatch.setattr(tensors, "_stream", rewrite_first)
    code, found = verdict(bound["gpt2"], base_dir=base, use_cache=False)
    assert code in (1, 2), found


# --- 8. huge or endless inputs ---------------------------------------------


def test_a_huge_header_length_is_refused_at_once(bound: dict[str, Path], tmp_path: Path) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    (project / "adapter" / ADAPTER).write_bytes(struct.pack("<Q", 2**63) + b"{}")
    code, _ = _within(10, lambda: verdict(project))
    assert code in (1, 2)


def test_huge_shapes_in_a_base_shard_are_unusable(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    base = _base_from(models, tmp_path)
    header = json.dumps({"w": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 8]}})
    raw = header.encode() + b" " * (-len(header) % 8)
    (base / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 8)
    code, _ = _within(10, lambda: verdict(bound["gpt2"], base_dir=base))
    assert code == 2


def test_a_huge_sparse_file_in_the_adapter_is_not_read(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    """A terabyte of holes beside the adapter: refused without hashing it."""
    project = project_copy(bound, "gpt2", tmp_path)
    with open(project / "adapter" / "huge.bin", "wb") as fh:
        fh.truncate(1 << 40)
    code, found = _within(20, lambda: verdict(project))
    assert code == 1 and any(f.field == "huge.bin" for f in errors(found))


def test_a_bound_file_swapped_for_a_huge_sparse_one_is_not_read(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    with open(project / "adapter" / "adapter_config.json", "r+b") as fh:
        fh.truncate(1 << 40)
    code, _ = _within(20, lambda: verdict(project))
    assert code in (1, 2)


def test_a_huge_sparse_base_shard_is_not_hashed_to_the_end(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path
) -> None:
    """A valid header claiming a terabyte tensor: the bound byte count refuses it first."""
    base = _base_from(models, tmp_path)
    n = 1 << 40
    header = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}})
    raw = header.encode() + b" " * (-len(header) % 8)
    path = base / "model.safetensors"
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + n)
    code, _ = _within(20, lambda: verdict(bound["gpt2"], base_dir=base, use_cache=False))
    assert code in (1, 2)


# --- load_bound: what is loaded is what was checked ------------------------


def test_load_bound_loads_the_files_it_checked(
    bound: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adapter swapped for another between the check and peft's read."""
    from ftmanifest.adapter import load as loadmod

    project = project_copy(bound, "gpt2", tmp_path)
    adapter = project / "adapter"
    real = loadmod.check_adapter

    def check_then_swap(*a: Any, **kw: Any) -> Any:
        report = real(*a, **kw)
        data = bytearray((adapter / ADAPTER).read_bytes())
        data[-5] ^= 0x40
        (adapter / ADAPTER).write_bytes(bytes(data))
        return report

    monkeypatch.setattr(loadmod, "check_adapter", check_then_swap)
    with pytest.raises(AdapterRefusedError) as info:  # refused, or loads the checked bytes
        load_bound(adapter, manifest=project / "exp.json")
    assert {f.field for f in info.value.findings if f.rule == "adapter.files-changed"} == {ADAPTER}


def test_load_bound_loads_its_private_copy(bound: dict[str, Path], tmp_path: Path) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    adapter = project / "adapter"
    model = load_bound(adapter, manifest=project / "exp.json")
    from safetensors.numpy import load_file

    saved = load_file(str(adapter / ADAPTER))
    loaded = {n: p.detach().numpy() for n, p in model.named_parameters() if "lora_" in n}
    assert loaded
    for name, arr in saved.items():  # the adapter's weights, loaded from the copy
        mine = next(v for k, v in loaded.items() if k.replace(".default", "").endswith(
            name.removeprefix("base_model.model.")))  # fmt: skip
        assert (arr == mine).all()


def test_load_bound_refuses_a_base_swapped_after_the_check(
    bound: dict[str, Path], models: dict[str, Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from ftmanifest.adapter import load as loadmod

    project = project_copy(bound, "gpt2", tmp_path)
    real = loadmod.check_adapter

    def check_then_swap(*a: Any, **kw: Any) -> Any:
        report = real(*a, **kw)
        shutil.copy(models["gpt2-b"] / "model.safetensors", project / "base" / "model.safetensors")
        return report

    monkeypatch.setattr(loadmod, "check_adapter", check_then_swap)
    with pytest.raises(AdapterRefusedError) as info:
        load_bound(project / "adapter", manifest=project / "exp.json")
    assert "adapter.base-weights-differ" in {f.rule for f in info.value.findings}


def test_load_bound_refuses_a_subfolder_it_did_not_check(
    bound: dict[str, Path], tmp_path: Path
) -> None:
    project = project_copy(bound, "gpt2", tmp_path)
    with pytest.raises(FtManifestError) as info:
        load_bound(project / "adapter", manifest=project / "exp.json", subfolder="x")
    assert info.value.exit_code == 2
