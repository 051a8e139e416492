"""An ONNX model's external data file is judged as that model's data, not refused.

Models are saved with the real ``onnx`` library (``save_as_external_data``, as it
does for every model over 2 GB) and loaded back with ``onnx.load``, which proves
the files are a real model and its data.  Before this judge the data file was
``scan.unknown-format``: raw floats are neither a pickle nor text.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ftmanifest.scan.engine import scan_paths

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(*locations: str) -> object:
    """Two weights; with ``locations``, each kept outside under that name."""
    rng = np.random.default_rng(7)
    weights = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype("float32"), n)
               for n in ("w1", "w2")]  # fmt: skip
    for w, location in zip(weights, locations, strict=False):
        size = len(w.raw_data)
        w.ClearField("raw_data")
        w.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", "0"), ("length", str(size))):
            entry = w.external_data.add()
            entry.key, entry.value = key, value
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    graph = helper.make_graph(nodes, "g", [x], [y], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _noise(size: int) -> bytes:
    """Bytes of no format, the same every run: about one random file in eighty starts
    with a pickle opcode (0x82 to 0x88) and is rightly judged as a pickle."""
    return random.Random(size).randbytes(size)


def _rules(folder: Path) -> dict[tuple[str, str], str]:
    return {(Path(f.path or "").name, f.rule): f.severity for f in scan_paths([folder]).findings}


def _saved(folder: Path, **kw: object) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "model.onnx"
    onnx.save_model(_model(), path, save_as_external_data=True, size_threshold=0, **kw)
    loaded = onnx.load(path)  # the real loader reads the data file back
    assert numpy_helper.to_array(loaded.graph.initializer[0]).shape == (16, 16)
    return path


def test_a_model_saved_with_external_data_is_clean(tmp_path: Path) -> None:
    _saved(tmp_path, location="model.onnx.data")
    assert (tmp_path / "model.onnx.data").stat().st_size == 2 * 16 * 16 * 4
    assert _rules(tmp_path) == {}


def test_one_data_file_per_tensor_is_clean(tmp_path: Path) -> None:
    _saved(tmp_path, all_tensors_to_one_file=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "w1", "w2"]
    assert _rules(tmp_path) == {}


def test_a_data_file_no_model_names_stays_an_error(tmp_path: Path) -> None:
    _saved(tmp_path, location="model.onnx.data")
    (tmp_path / "stray.data").write_bytes((tmp_path / "model.onnx.data").read_bytes())
    assert _rules(tmp_path) == {("stray.data", "scan.unknown-format"): "error"}


def test_a_model_elsewhere_does_not_vouch_for_this_folder(tmp_path: Path) -> None:
    _saved(tmp_path / "a", location="weights.data")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "weights.data").write_bytes((tmp_path / "a" / "weights.data").read_bytes())
    assert _rules(tmp_path) == {("weights.data", "scan.unknown-format"): "error"}


def test_a_location_that_climbs_out_is_an_error_and_vouches_for_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (tmp_path / "secret").write_bytes(_noise(2048))  # no format of its own
    (folder / "w.data").write_bytes(_noise(2048))
    onnx.save(_model("../secret", "../m/w.data"), folder / "model.onnx")
    with pytest.raises(Exception, match="outside|should be file inside|\\.\\."):
        onnx.load(folder / "model.onnx")  # the real loader refuses to climb out
    found = _rules(tmp_path)
    assert found[("model.onnx", "onnx.external-data-outside")] == "error"
    assert found[("secret", "scan.unknown-format")] == "error"
    assert found[("w.data", "scan.unknown-format")] == "error"


def test_a_data_file_named_by_a_model_that_is_not_clean_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "w2.data").write_bytes(_noise(1024))
    onnx.save(_model("/etc/hostname", "w2.data"), tmp_path / "model.onnx")
    found = _rules(tmp_path)
    assert found[("w2.data", "onnx.external-data-owner")] == "error"
    assert found[("model.onnx", "onnx.external-data-outside")] == "error"


def test_a_range_past_the_end_of_the_data_file_is_an_error(tmp_path: Path) -> None:
    _saved(tmp_path, location="model.onnx.data")
    data = tmp_path / "model.onnx.data"
    data.write_bytes(data.read_bytes()[:1500])  # cut inside the second tensor
    with pytest.raises(Exception):  # noqa: B017 - the loader's own error type varies
        numpy_helper.to_array(onnx.load(tmp_path / "model.onnx").graph.initializer[1])
    found = _rules(tmp_path)
    assert found == {("model.onnx.data", "onnx.external-data-range"): "error"}


def test_a_model_naming_an_absent_data_file_is_not_clean(tmp_path: Path) -> None:
    _saved(tmp_path, location="model.onnx.data")
    (tmp_path / "model.onnx.data").unlink()
    with pytest.raises(Exception):  # noqa: B017
        onnx.load(tmp_path / "model.onnx")
    assert _rules(tmp_path) == {("model.onnx", "onnx.external-data-missing"): "warning"}


def test_the_cache_does_not_keep_a_data_file_clean_after_its_model_is_gone(tmp_path: Path) -> None:
    """The data file's verdict depends on the model beside it, not on its own bytes:
    a result cached while the model vouched for it must not outlive the model."""
    from ftmanifest.scan.cache import scan_cached

    folder, cache = tmp_path / "m", tmp_path / "cache"
    _saved(folder, location="model.onnx.data")

    def rules() -> set[tuple[str, str]]:
        found = scan_cached([folder], cache_dir=cache).findings
        return {(Path(f.path or "").name, f.rule or "") for f in found if f.severity == "error"}

    assert rules() == set()  # vouched for by the model, and cached by a second scan
    assert rules() == set()
    (folder / "model.onnx").unlink()
    assert ("model.onnx.data", "scan.unknown-format") in rules()


def test_control_an_unchanged_folder_still_scans_clean_with_the_cache(tmp_path: Path) -> None:
    from ftmanifest.scan.cache import scan_cached

    folder, cache = tmp_path / "m", tmp_path / "cache"
    _saved(folder, location="model.onnx.data")
    for _ in range(2):
        assert [
            f for f in scan_cached([folder], cache_dir=cache).findings if f.severity == "error"
        ] == []
