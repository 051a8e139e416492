"""HDF5 files (Keras ``.h5``) are judged by what h5py and Keras would read.

Files are written by real h5py, models saved by real Keras 3 (torch backend)
and loaded back: safe mode refusing a Lambda shows the bytecode is what
loading runs; h5py following an external link or external storage shows the
other file is read.  Before this judge every HDF5 file was a "not judged" row.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from ftmanifest.scan.artifacts import hdf5_model  # noqa: E402
from ftmanifest.scan.artifacts.sniff import detect_format  # noqa: E402
from ftmanifest.scan.engine import scan_paths  # noqa: E402

TOKEN = "ghp_" + "Hq7Lm2Vx9Rt4Kp1Wz6Bn3Dc8Fg5Js0Ya2Ue7"


def _rules(path: Path) -> dict[str, str]:
    return {f.rule: f.severity for f in scan_paths([path]).findings}


@pytest.fixture
def keras():  # type: ignore[no-untyped-def]
    os.environ.setdefault("KERAS_BACKEND", "torch")
    return pytest.importorskip("keras")


def test_a_plain_keras_model_is_clean(tmp_path: Path, keras) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "dense.h5"
    keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)]).save(path)
    keras.models.load_model(path)  # the real loader takes it
    assert detect_format(path) == "hdf5"
    assert _rules(path) == {}


def test_a_keras3_lambda_layer_is_an_error(tmp_path: Path, keras) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "lambda.h5"
    inp = keras.Input((2,))
    keras.Model(inp, keras.layers.Lambda(lambda x: x * 2)(inp)).save(path)
    with pytest.raises(ValueError, match="Lambda"):
        keras.models.load_model(path)  # safe mode refuses the bytecode it holds
    found = [f for f in scan_paths([path]).findings if f.rule == "keras.lambda-layer"]
    assert [(f.severity, f.field) for f in found] == [("error", "attribute model_config")]


def test_a_keras2_lambda_layer_is_an_error(tmp_path: Path) -> None:
    # tf.keras 2 writes a Lambda as [base64 marshal, defaults, closure] with
    # function_type "lambda", and runs it on load_model (no safe mode for .h5)
    config = {
        "class_name": "Sequential",
        "config": {
            "layers": [
                {
                    "class_name": "Lambda",
                    "config": {"function": ["4wEAAAAA", None, None], "function_type": "lambda"},
                }
            ]
        },
    }
    path = tmp_path / "tf2.h5"
    with h5py.File(path, "w") as f:
        f.attrs["model_config"] = json.dumps(config)
        f.attrs["keras_version"] = "2.15.0"
    found = [f for f in scan_paths([path]).findings if f.rule == "keras.lambda-layer"]
    assert [f.severity for f in found] == ["error"]


def test_an_external_link_is_an_error_and_h5py_follows_it(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.h5"
    with h5py.File(other, "w") as f:
        f["w"] = np.arange(4.0)
    path = tmp_path / "linked.h5"
    with h5py.File(path, "w") as f:
        f["layer"] = h5py.ExternalLink(str(other), "/w")
    with h5py.File(path, "r") as f:
        assert f["layer"][()].tolist() == [0.0, 1.0, 2.0, 3.0]  # the other file's data
    found = [f for f in scan_paths([path]).findings if f.rule == "hdf5.external-file"]
    assert len(found) == 1 and str(other) in found[0].message
    assert found[0].severity == "error" and found[0].field == "layer"


def test_external_storage_is_an_error_and_h5py_reads_it(tmp_path: Path) -> None:
    raw = tmp_path / "raw.bin"
    raw.write_bytes(np.arange(4, dtype="<f8").tobytes())
    path = tmp_path / "extstore.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("kernel", shape=(4,), dtype="<f8", external=[(str(raw), 0, 32)])
    with h5py.File(path, "r") as f:
        assert f["kernel"][()].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert _rules(path) == {"hdf5.external-file": "error"}


def test_a_filter_plugin_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "plugin.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("w", shape=(8,), chunks=(4,), dtype="f4", compression=32015,
                         allow_unknown_filter=True)  # fmt: skip
    found = [f for f in scan_paths([path]).findings if f.rule == "hdf5.filter-plugin"]
    assert [(f.severity, f.observed) for f in found] == [("warning", "filter 32015")]


def test_strings_in_attributes_and_datasets_are_scanned(tmp_path: Path) -> None:
    path = tmp_path / "notes.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("log", data=[f"push with {TOKEN}".encode()])
        f.create_group("g").attrs["note"] = "nothing here"
    found = [f for f in scan_paths([path]).findings if f.kind == "secret"]
    assert [f.extra.get("member") for f in found] == ["log"]
    with h5py.File(path, "r+") as f:
        f["g"].attrs["note"] = f"token {TOKEN}"
    found = {f.extra.get("member") for f in scan_paths([path]).findings if f.kind == "secret"}
    assert found == {"log", "g@note"}


def test_a_user_block_does_not_hide_the_file(tmp_path: Path, keras) -> None:  # type: ignore[no-untyped-def]
    # libhdf5 finds the superblock at 512, 1024, ...: text before it is not the format
    path = tmp_path / "prefixed.h5"
    inp = keras.Input((2,))
    keras.Model(inp, keras.layers.Lambda(lambda x: x + 1)(inp)).save(tmp_path / "m.h5")
    with h5py.File(tmp_path / "m.h5", "r") as src, h5py.File(path, "w", userblock_size=4096) as f:
        for key, value in src.attrs.items():
            f.attrs[key] = value
    with open(path, "r+b") as fh:
        fh.write(b"just a readme\n" * 200)
    with h5py.File(path, "r") as f:
        assert "model_config" in f.attrs
    assert detect_format(path) == "hdf5"
    assert _rules(path).get("keras.lambda-layer") == "error"


def test_a_pickle_in_the_user_block_is_judged_as_well(tmp_path: Path) -> None:
    # one file, two readings: h5py skips the user block, pickle.load reads only it
    path = tmp_path / "both.h5"
    with h5py.File(path, "w", userblock_size=512) as f:
        f["w"] = np.zeros(2)
    payload = pickle.dumps(os.getcwd)  # an import and a call a loader would make
    with open(path, "r+b") as fh:
        fh.write(payload)
    imports: list[tuple[str, str]] = []

    class Recording(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> object:
            imports.append((module, name))
            return super().find_class(module, name)

    with open(path, "rb") as fh:
        Recording(fh).load()
    with h5py.File(path, "r") as f:
        assert f["w"].shape == (2,)
    assert imports == [("posix", "getcwd")]
    rules = _rules(path)
    assert any(rule.startswith("pickle.") for rule in rules), rules


def test_a_dataset_of_an_unjudged_type_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "opaque.h5"
    with h5py.File(path, "w") as f:
        f["blob"] = np.void(b"hidden bytes")
    assert _rules(path) == {"hdf5.not-judged": "error"}


def test_a_broken_file_is_unreadable_not_clean(tmp_path: Path) -> None:
    path = tmp_path / "broken.h5"
    path.write_bytes(hdf5_model.MAGIC + os.urandom(2000))
    found = scan_paths([path]).findings
    assert [(f.rule, f.severity) for f in found] == [("hdf5.unreadable", "error")]
    assert found[0].hint


def test_without_h5py_it_is_not_scanned_and_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "w.h5"
    with h5py.File(path, "w") as f:
        f["w"] = np.zeros(2)
    monkeypatch.setattr(hdf5_model, "have_reader", lambda: False)
    found = scan_paths([path]).findings
    assert [(f.rule, f.severity) for f in found] == [("hdf5.no-reader", "error")]
    assert "install h5py" in (found[0].hint or "")
