"""Format detection from bytes, not names (ftmanifest.scan.artifacts.sniff)."""

from __future__ import annotations

import gzip
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from ftmanifest.scan.artifacts.sniff import TORCH_MAGIC, detect_format


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


@pytest.mark.parametrize(
    "text",
    [
        '{"text": "hello"}\n{"text": "world"}\n',  # JSONL
        '[{"a": 1}, {"b": 2}]\n',
        "# Model card\n\nLicense: MIT\n",
        "Install with pip.\nThen run it.\n",
        "Notes: none\n",
        "Settings\n========\n",
        "License\n\nCopyright 2024\n",
        "Kernel size 3\n",
        "Usage: ftmanifest scan PATH\n",
        "The quick brown fox\n",
        "import os\nprint(os.getcwd())\n",
        "class Model:\n    pass\n",
        "id,name\n1,x\n",
        "#version: 0.2\nĠ t\nĠ a\n",  # merges.txt
        "[PAD]\n[UNK]\n[CLS]\n",  # vocab.txt
        "(see below)\n",
        "lr: 0.001\nepochs: 3\n",  # YAML
    ],
)
def test_real_text_stays_text(tmp_path: Path, text: str) -> None:
    assert detect_format(_write(tmp_path / "t", text.encode("utf-8"))) == "text"


def test_real_tokenizer_files_are_text(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["hello world", "héllo wörld again"], trainers.BpeTrainer())
    tok.save(str(tmp_path / "tokenizer.json"))
    tok.model.save(str(tmp_path))
    files = sorted(tmp_path.iterdir())
    assert {p.name for p in files} >= {"tokenizer.json", "vocab.json", "merges.txt"}
    assert {p.name: detect_format(p) for p in files} == {p.name: "text" for p in files}


def test_protocol0_and_1_pickles_of_every_shape(tmp_path: Path) -> None:
    """CPython's protocols 0/1 write headerless pickles; all of them are pickles."""
    values = [None, 0, -1, 2**70, 1.5, "x", b"y", (), [], {}, {1, 2}, [{"a": (1, "b")}]]
    for protocol in (0, 1):
        for i, value in enumerate(values):
            path = _write(tmp_path / f"v{protocol}_{i}.txt", pickle.dumps(value, protocol))
            assert detect_format(path) == "pickle", (protocol, value)


def test_installed_packages_text_files_stay_text() -> None:
    """Every text file of a few real packages (the dist-info top_level.txt too)."""
    import sysconfig

    root = Path(sysconfig.get_paths()["purelib"])
    files = [
        p
        for pkg in ("hypothesis", "pytest", "transformers/models/bert", "sympy-*.dist-info")
        for p in sorted(root.glob(f"{pkg}/**/*"))
        if p.suffix in {".py", ".txt", ".json", ".md", ".pyi", ".cfg", ".toml"}
        and p.is_file()
        and p.stat().st_size
    ]
    assert len(files) > 100
    assert [p for p in files if detect_format(p) != "text"] == []
