"""Keras ``.keras`` archives are judged by their config.

Models are saved by real Keras 3 (torch backend) and loaded back: its safe
mode refuses the Lambda layer, which shows the bytecode is what loading would
run; the plain model loads and is clean (its weights file is data).
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")

from ftmanifest.scan.engine import scan_paths  # noqa: E402


def _rules(path: Path) -> dict[str, str]:
    return {f.rule: f.severity for f in scan_paths([path]).findings}


def test_a_plain_model_is_clean(tmp_path: Path) -> None:
    path = tmp_path / "dense.keras"
    keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)]).save(path)
    keras.models.load_model(path)  # the real loader takes it
    assert _rules(path) == {}


def test_a_lambda_layer_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "lambda.keras"
    inp = keras.Input((2,))
    keras.Model(inp, keras.layers.Lambda(lambda x: x * 2)(inp)).save(path)
    with pytest.raises(ValueError, match="Lambda"):
        keras.models.load_model(path)  # safe mode refuses the bytecode
    assert _rules(path) == {"keras.lambda-layer": "error"}


def test_an_object_from_another_module_is_named(tmp_path: Path) -> None:
    path = tmp_path / "custom.keras"
    keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)]).save(path)
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    config = json.loads(members["config.json"])
    config["config"]["layers"][-1]["module"] = "evil_pkg.layers"
    members["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    found = [f for f in scan_paths([path]).findings if f.rule == "keras.custom-object"]
    assert [(f.observed, f.severity) for f in found] == [("evil_pkg.layers.Dense", "warning")]
