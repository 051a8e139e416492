"""Format detection from bytes, not names (ftmanifest.scan.sniff)."""

from __future__ import annotations

import gzip
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from ftmanifest.scan.sniff import TORCH_MAGIC, detect_format


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_real_torch_and_numpy_files(tmp_path: Path) -> None:
    sd = {"w": torch.ones(2, 2)}
    torch.save(sd, tmp_path / "model.safetensors")  # misleading name on purpose
    torch.save(sd, tmp_path / "legacy.txt", _use_new_zipfile_serialization=False)
    save_file(sd, str(tmp_path / "weights.bin"))
    np.save(tmp_path / "a.npy", np.arange(3))
    np.savez(tmp_path / "a.npz", x=np.arange(3))
    assert detect_format(tmp_path / "model.safetensors") == "torch-zip"
    assert detect_format(tmp_path / "legacy.txt") == "torch-legacy"
    assert detect_format(tmp_path / "weights.bin") == "safetensors"
    assert detect_format(tmp_path / "a.npy") == "npy"
    assert detect_format(tmp_path / "a.npz") == "npz"


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_plain_pickles_every_protocol(tmp_path: Path, protocol: int) -> None:
    data = pickle.dumps({"a": [1, 2.5, "x"], "b": (None, True)}, protocol=protocol)
    assert detect_format(_write(tmp_path / "x.json", data)) == "pickle"


@pytest.mark.parametrize("protocol", [0, 1, 2, 4])
def test_legacy_magic_any_protocol(tmp_path: Path, protocol: int) -> None:
    data = pickle.dumps(TORCH_MAGIC, protocol=protocol) + pickle.dumps(1001, protocol=protocol)
    assert detect_format(_write(tmp_path / "x", data)) == "torch-legacy"


def test_other_formats(tmp_path: Path) -> None:
    assert detect_format(_write(tmp_path / "e", b"")) == "empty"
    assert detect_format(_write(tmp_path / "g", gzip.compress(b"hello\n"))) == "gzip"
    assert detect_format(_write(tmp_path / "p", b"PAR1" + b"\0" * 20 + b"PAR1")) == "parquet"
    assert detect_format(_write(tmp_path / "b", bytes(range(256)) * 4)) == "binary"
    with zipfile.ZipFile(tmp_path / "z.pt", "w") as zf:
        zf.writestr("readme.txt", "hi")
    assert detect_format(tmp_path / "z.pt") == "zip"
    with zipfile.ZipFile(tmp_path / "k.zip", "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps(1, protocol=2))
    assert detect_format(tmp_path / "k.zip") == "torch-zip"
    assert detect_format(_write(tmp_path / "broken.pt", b"PK\x03\x04garbage")) == "zip"


@pytest.mark.parametrize(
    "text",
    [
        "function{ return 1 }\n",  # 8 bytes then '{' is not a safetensors header
        '{"a": 1}\n',
        "(hello) world\n",  # starts with a pickle opcode, but is text
        "c = 1\nprint(c)\n",
        "Vocabulary size\nnext line\nthird line\n",
        "héllo wörld, ünïcode\n",
        "id,name\n1,x\n",
    ],
)
def test_text_stays_text(tmp_path: Path, text: str) -> None:
    assert detect_format(_write(tmp_path / "t", text.encode("utf-8"))) == "text"


def test_safetensors_with_absurd_length_is_still_safetensors(tmp_path: Path) -> None:
    data = (10**9).to_bytes(8, "little") + b'{"a": 1}'
    assert detect_format(_write(tmp_path / "s", data)) == "safetensors"
