"""A Keras config nested past what the judge reads is an error, never clean."""

from __future__ import annotations

import json

from ftmanifest.scan.artifacts.keras_model import MAX_DEPTH, judge_config

LAMBDA = {"class_name": "Lambda", "config": {"function": ["4wEAAAAAAAAA", None, None]}}


def _nested(levels: int, inner: object) -> bytes:
    node: object = inner
    for _ in range(levels):  # a model inside a model's layers, over and over
        node = {"class_name": "Functional", "config": {"layers": [node]}}
    return json.dumps(node).encode()


def test_a_lambda_past_the_depth_read_is_an_error() -> None:
    deep = _nested(MAX_DEPTH // 2 + 10, LAMBDA)  # each level is three nodes deep
    found = judge_config("m.keras", "config.json", deep)
    assert any(f.severity == "error" for f in found), found
    # controls: the same nesting with a plain layer inside is deep, so still not judged
    # as clean; a shallow Lambda is the Lambda error itself
    plain = judge_config(
        "m.keras", "config.json", _nested(MAX_DEPTH // 2 + 10, {"class_name": "Dense"})
    )
    assert [f.rule for f in plain] == ["keras.unreadable"]
    assert plain[0].observed and plain[0].observed.startswith(f"deeper than {MAX_DEPTH} levels")
    shallow = judge_config("m.keras", "config.json", _nested(3, LAMBDA))
    assert [f.rule for f in shallow] == ["keras.lambda-layer"]
    assert judge_config("m.keras", "config.json", _nested(3, {"class_name": "Dense"})) == []
