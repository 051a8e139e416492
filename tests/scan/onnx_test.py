"""ONNX models are judged as ONNX, never as text.

Models are built with the real ``onnx`` library and, where it matters, loaded
with it: its loader refuses external data outside the model's folder, which
shows the ``location`` field is what it reads.  A tiny model is mostly names,
so before this judge it was taken for text and reported clean.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ftmanifest.scan.artifacts.sniff import detect_format
from ftmanifest.scan.engine import scan_paths

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

GITHUB_TOKEN = "ghp_" + "Zk3V9qLm2Xw8Rt5Yp1Nc7Bd4Hf6Jg0Ks2Lq9"


def _model(*, location: str | None = None, domain: str = "", doc: str = "") -> object:
    weight = helper.make_tensor("w", TensorProto.FLOAT, [1], b"\x00\x00\x00?", raw=True)  # 0.5
    if location is not None:
        weight.data_location = TensorProto.EXTERNAL
        weight.ClearField("raw_data")
        entry = weight.external_data.add()
        entry.key, entry.value = "location", location
    node = helper.make_node("Add" if not domain else "Mix", ["x", "w"], ["y"], domain=domain)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([node], "g", [x], [y], [weight], doc_string=doc)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets)


def _rules(path: Path) -> dict[str, str]:
    return {f.rule: f.severity for f in scan_paths([path]).findings}


@pytest.mark.parametrize("location", ["../../../../etc/passwd", "/etc/passwd"])
def test_external_data_outside_the_folder_is_an_error(tmp_path: Path, location: str) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_model(location=location), path)
    with pytest.raises(Exception, match="outside|absolute|should be file inside"):
        onnx.load(path)  # the real loader reads that location, and refuses it
    assert _rules(path) == {"onnx.external-data-outside": "error"}


def test_external_data_through_a_link_that_leads_out_is_an_error(tmp_path: Path) -> None:
    os.symlink("/etc/hostname", tmp_path / "w.data")
    path = tmp_path / "model.onnx"
    onnx.save(_model(location="w.data"), path)
    assert _rules(path) == {"onnx.external-data-outside": "error"}


def test_a_model_with_its_external_data_beside_it_is_clean(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_model(), path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.data", size_threshold=0)  # fmt: skip
    assert numpy_helper.to_array(onnx.load(path).graph.initializer[0]).tolist() == [0.5]
    stored = onnx.load(path, load_external_data=False).graph.initializer[0]
    assert stored.data_location == TensorProto.EXTERNAL and (tmp_path / "weights.data").is_file()
    assert _rules(path) == {}


def test_a_custom_operator_domain_is_named(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_model(domain="com.example.ops"), path)
    found = [f for f in scan_paths([path]).findings if f.rule == "onnx.custom-op-domain"]
    assert [(f.observed, f.severity) for f in found] == [("com.example.ops", "warning")]
    builtin = tmp_path / "ort.onnx"
    onnx.save(_model(domain="com.microsoft"), builtin)  # onnxruntime's own contrib operators
    assert _rules(builtin) == {}


def test_sniffed_by_content_whatever_its_name(tmp_path: Path) -> None:
    path = tmp_path / "graph.bin"
    onnx.save(_model(location="../outside.bin"), path)
    assert detect_format(path) == "onnx"
    assert "onnx.external-data-outside" in _rules(path)


def test_its_documentation_strings_are_scanned_for_secrets(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_model(doc=f"exported with token {GITHUB_TOKEN}"), path)
    assert any(f.kind == "secret" for f in scan_paths([path]).findings)


def test_a_truncated_model_is_an_error_not_clean(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_model(), path)
    path.write_bytes(path.read_bytes()[:-7])
    assert _rules(path) == {"onnx.unreadable": "error"}


def test_a_model_whose_fields_come_in_another_order_is_still_onnx(tmp_path: Path) -> None:
    """Protobuf fields may come in any order; onnx parses the file either way."""
    model = _model(location="../../etc/passwd")
    graph = model.graph.SerializeToString()
    rest = onnx.ModelProto()
    rest.CopyFrom(model)
    rest.ClearField("graph")
    length = b""
    n = len(graph)
    while n >= 0x80:
        length, n = length + bytes([n & 0x7F | 0x80]), n >> 7
    data = b"\x3a" + length + bytes([n]) + graph + rest.SerializeToString()
    assert onnx.load_from_string(data).graph.node[0].op_type == "Add"
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    assert detect_format(path) == "onnx"
    assert "onnx.external-data-outside" in _rules(path)


def test_text_that_starts_with_a_colon_is_not_taken_for_onnx(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(": hello world\nsecond line\n")
    assert detect_format(path) == "text"
