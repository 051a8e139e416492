"""A torch zip is judged by what ``torch.load`` reads.

``data.pkl`` is a pickle; the storages it names (``archive/data/<key>``) are raw
tensor bytes that torch never unpickles, whatever their first byte spells.  A
storage starting with 0x82 (EXT1) used to be walked as a pickle and refused, so
a real checkpoint of a few hundred tensors was refused about two times in three.
A member no pickle names is reported for what it is, and a pickle hidden there
is still judged.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import pytest

from ftmanifest.scan.engine import scan_paths

torch = pytest.importorskip("torch")


def _errors(path: Path) -> list[str]:
    return [f.rule for f in scan_paths([path]).findings if f.severity == "error"]


def test_storages_whose_bytes_spell_opcodes_are_data(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(0)
    state = {f"layer.{i}.weight": torch.rand(4, 4, generator=gen) for i in range(300)}
    for i, first in enumerate((0x82, 0x83, 0x84, 0x80, 0x63, 0x93)):  # EXT1/2/4, PROTO, c, \x93
        raw = torch.zeros(16, dtype=torch.uint8)
        raw[0] = first
        state[f"spelled.{i}"] = raw
    path = tmp_path / "pytorch_model.bin"
    torch.save(state, path)
    loaded = torch.load(path, weights_only=True)  # the real loader: plain tensors
    assert loaded["spelled.0"][0].item() == 0x82
    assert _errors(path) == []


def test_a_pickle_in_a_member_no_pickle_names_is_still_judged(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save({"w": torch.zeros(2)}, path)
    prefix = zipfile.ZipFile(path).namelist()[0].split("/")[0]
    hidden = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00hiq\x01\x85q\x02Rq\x03."
    assert pickle.loads(hidden.replace(b"os\nsystem", b"builtins\nlen")) == 2  # a real pickle
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(f"{prefix}/data/999", hidden)
    found = scan_paths([path]).findings
    rules = {(f.rule, f.severity) for f in found}
    assert ("pickle.unsafe-import", "error") in rules
    assert ("torch.unreferenced-member", "warning") in rules
    (row,) = [f for f in found if f.rule == "torch.unreferenced-member"]
    assert row.field == f"{prefix}/data/999"
