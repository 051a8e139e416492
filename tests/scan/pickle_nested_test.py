"""A pickle stored as bytes inside a pickle is judged too.

Code that unpickles a checkpoint's field (``pickle.loads(state["payload"])``)
runs what that field's pickle imports; the outer pickle alone imports
nothing.  The inner import is named with where the bytes sit.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import pytest

from ftmanifest.scan.engine import scan_paths

INNER = b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R."


class _Recorder(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        raise AssertionError(f"{module}.{name}")


def test_an_import_in_a_stored_pickle_is_found(tmp_path: Path) -> None:
    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps({"lr": 0.1, "payload": INNER}, protocol=4))
    state = pickle.loads(path.read_bytes())  # the outer pickle imports nothing
    with pytest.raises(AssertionError, match="^os.system$"):  # what loading the field imports
        _Recorder(io.BytesIO(state["payload"])).load()
    (row,) = [f for f in scan_paths([path]).findings if f.rule == "pickle.unsafe-import"]
    assert row.observed == "os.system" and "stored as bytes" in row.message


def test_a_stored_pickle_of_plain_data_is_clean(tmp_path: Path) -> None:
    path = tmp_path / "cache.pkl"
    path.write_bytes(pickle.dumps({"cache": pickle.dumps({"a": [1, 2]})}, protocol=4))
    assert scan_paths([path]).findings == []


def test_bytes_that_only_start_like_a_pickle_are_data(tmp_path: Path) -> None:
    path = tmp_path / "blob.pkl"
    path.write_bytes(pickle.dumps({"blob": b"\x80\x04\xff\xfe not a pickle"}, protocol=4))
    assert scan_paths([path]).findings == []
