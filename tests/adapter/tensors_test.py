"""Tensor digests: sharding-independent, one weight changes them, no torch needed."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ftmanifest.adapter.tensors import (
    DIGEST_KIND,
    DuplicateTensorError,
    SafetensorsError,
    read_header,
    state_dict_digest,
    tensor_digest,
    tensor_shapes,
    weight_files,
)
from ftmanifest.statcache import StatCache
from tests.conftest import ROOT, settle


def digest(folder: Path, **kw: object) -> str:
    return tensor_digest(weight_files(folder), use_cache=False, **kw).digest  # type: ignore[arg-type]


def flip_byte(path: Path, offset: int) -> None:
    with path.open("r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([b[0] ^ 1]))


def test_resharded_copy_has_the_same_digest(models: dict[str, Path]) -> None:
    sharded = weight_files(models["gpt2-a-sharded"])
    assert len(sharded) > 1  # the index names several shards
    assert digest(models["gpt2-a"]).startswith(f"{DIGEST_KIND}:")
    assert digest(models["gpt2-a"]) == digest(models["gpt2-a-sharded"])


def test_other_weights_and_one_changed_weight_differ(
    models: dict[str, Path], tmp_path: Path
) -> None:
    a = digest(models["gpt2-a"])
    assert digest(models["gpt2-b"]) != a
    changed = shutil.copytree(models["gpt2-a"], tmp_path / "a")
    header = read_header(changed / "model.safetensors")
    flip_byte(changed / "model.safetensors", header.tensors[3].begin + 1)
    assert digest(changed) != a


def test_state_dict_digest_equals_the_file_digest(models: dict[str, Path]) -> None:
    from safetensors.torch import load_file

    files = weight_files(models["gpt2-a-sharded"])
    state = {k: v for f in files for k, v in load_file(str(f)).items()}
    assert state_dict_digest(state) == digest(models["gpt2-a"])


def test_shapes_from_headers_only(models: dict[str, Path]) -> None:
    shapes = tensor_shapes(weight_files(models["gpt2-a"]))
    assert shapes["transformer.h.0.attn.c_attn.weight"] == ("F32", (16, 48))


def test_duplicate_tensor_across_shards_is_an_error(
    models: dict[str, Path], tmp_path: Path
) -> None:
    folder = shutil.copytree(models["gpt2-a-sharded"], tmp_path / "dup")
    files = weight_files(folder)
    shutil.copy(files[0], folder / "extra.safetensors")
    with pytest.raises(DuplicateTensorError) as info:
        tensor_digest([*files, folder / "extra.safetensors"], use_cache=False)
    assert info.value.field and info.value.exit_code == 2


def test_malformed_header_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    body = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}).encode()
    bad.write_bytes(struct.pack("<Q", len(body)) + body + b"\0" * 4)
    with pytest.raises(SafetensorsError) as info:
        read_header(bad)
    assert info.value.field == "safetensors.size-mismatch"


def test_second_digest_comes_from_the_stat_cache(models: dict[str, Path], tmp_path: Path) -> None:
    folder = shutil.copytree(models["gpt2-a-sharded"], tmp_path / "cached")
    files = weight_files(folder)
    settle(*files)
    with StatCache(tmp_path / "cache") as cache:
        first = tensor_digest(files, cache=cache)
    with StatCache(tmp_path / "cache") as cache:
        second = tensor_digest(files, cache=cache)
    assert first.cached_files == 0 and second.cached_files == len(files)
    assert first.digest == second.digest == digest(models["gpt2-a"])


def test_file_digest_does_not_import_torch(models: dict[str, Path]) -> None:
    code = (
        "import sys\n"
        "from ftmanifest.adapter.tensors import tensor_digest, weight_files\n"
        f"print(tensor_digest(weight_files({str(models['gpt2-a'])!r}), use_cache=False).digest)\n"
        "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
