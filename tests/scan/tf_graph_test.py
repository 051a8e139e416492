"""TensorFlow graphs are judged by their operators.

TensorFlow is not installed here, so the messages are written field by field
from the protobuf definitions (``SavedModel.meta_graphs`` = 2,
``MetaGraphDef.graph_def`` = 2, ``GraphDef.node`` = 1 and ``library`` = 2,
``FunctionDefLibrary.function`` = 1, ``FunctionDef.node_def`` = 3,
``NodeDef.name`` = 1 and ``op`` = 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftmanifest.scan.engine import scan_paths


def _varint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _node(name: str, op: str) -> bytes:
    attr = _field(5, _field(1, b"dtype") + _field(2, b"\x30\x01"))  # an attr to skip
    return _field(1, name.encode()) + _field(2, op.encode()) + attr


def _graph(*ops: str, in_function: str | None = None) -> bytes:
    body = b"".join(_field(1, _node(f"n{i}", op)) for i, op in enumerate(ops))
    if in_function:
        function = _field(1, _field(1, b"fn")) + _field(3, _node("inner", in_function))
        body += _field(2, _field(1, function))
    return body


def _saved_model(graph: bytes) -> bytes:
    return b"\x08\x01" + _field(2, _field(2, graph))  # schema version 1, one meta graph


def _rules(path: Path) -> dict[str, str]:
    return {f.rule: f.severity for f in scan_paths([path]).findings}


def test_a_plain_saved_model_is_clean(tmp_path: Path) -> None:
    path = tmp_path / "saved_model.pb"
    path.write_bytes(_saved_model(_graph("Placeholder", "MatMul", "SaveV2", "RestoreV2")))
    assert _rules(path) == {}


@pytest.mark.parametrize("op", ["PyFunc", "EagerPyFunc", "PyFuncStateless"])
def test_a_python_operator_is_an_error(tmp_path: Path, op: str) -> None:
    path = tmp_path / "saved_model.pb"
    path.write_bytes(_saved_model(_graph("MatMul", op)))
    assert _rules(path) == {"tf.python-op": "error"}


def test_one_inside_a_library_function_is_found_too(tmp_path: Path) -> None:
    path = tmp_path / "saved_model.pb"
    path.write_bytes(_saved_model(_graph("MatMul", in_function="EagerPyFunc")))
    assert _rules(path) == {"tf.python-op": "error"}


def test_a_frozen_graph_that_reads_files_is_named(tmp_path: Path) -> None:
    path = tmp_path / "frozen.pb"
    path.write_bytes(_graph("Const", "ReadFile"))
    found = scan_paths([path]).findings
    assert [(f.rule, f.observed, f.severity) for f in found] == [
        ("tf.file-op", "ReadFile", "warning")
    ]


def test_a_truncated_graph_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "saved_model.pb"
    path.write_bytes(_saved_model(_graph("MatMul"))[:-3])
    assert _rules(path) == {"tf.unreadable": "error"}
