"""Every Lambda layer in a Keras config is an error, its function as bytecode or as source text.

Keras is not installed here: the configs are written as Keras 2 (``.h5``'s
``model_config``) and Keras 3 (``config.json``) serialise a Lambda, with the
function as marshalled bytecode, as source text (``function_type: "raw"``) or by
name; the h5 route is the same judge (``hdf5_model`` hands it the config).
"""

from __future__ import annotations

import json

import pytest

from ftmanifest.scan.artifacts.keras_model import judge_config

DENSE = {"class_name": "Dense", "config": {"name": "d", "units": 2}}


def _model(layer: dict) -> bytes:
    return json.dumps(
        {"class_name": "Sequential", "config": {"name": "m", "layers": [DENSE, layer]}}
    ).encode()


@pytest.mark.parametrize(
    "function",
    [
        {"function": "lambda x: __import__('os').system('id') or x", "function_type": "raw"},
        {"function": "def f(x):\n    return x\n", "function_type": "raw"},
        {"function": "my_module.double", "function_type": "function", "module": "my_module"},
        {"function": ["4wEAAAAAAAAAAAAAAAEAAAACAAAAQwAAAHMIAAAAfABkARQAUwA=", None, None]},
        {"function": {"class_name": "function", "config": "double", "module": "builtins"}},
    ],
)
def test_every_lambda_layer_is_an_error(function: dict) -> None:
    layer = {"class_name": "Lambda", "config": {"name": "l", **function}}
    found = judge_config("m.h5", "model_config", _model(layer))
    errors = [(f.rule, f.observed) for f in found if f.severity == "error"]
    assert errors == [("keras.lambda-layer", "Lambda at .config.layers[1]")], found


def test_a_model_without_lambda_is_clean() -> None:
    assert judge_config("m.keras", "config.json", _model(DENSE)) == []
