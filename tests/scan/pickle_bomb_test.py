"""Memo and DUP expansion bombs are named.

``x = [x, x]`` forty times pickles into a few hundred bytes, and loading it is
quick (the references are shared), but the object has 2**40 items once
unfolded: ``repr``, ``json.dumps`` or a recursive walk never finish.  The size
is shown to double per level on a small depth with the real ``json``.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

from ftmanifest.scan.engine import scan_paths


def _nested(depth: int) -> list[object]:
    x: list[object] = []
    for _ in range(depth):
        x = [x, x]
    return x


def test_shared_references_that_unfold_past_the_cap_are_an_error(tmp_path: Path) -> None:
    small = [len(json.dumps(_nested(d))) for d in (8, 9, 10)]
    assert small[1] > 1.9 * small[0] and small[2] > 1.9 * small[1]  # doubles per level
    path = tmp_path / "bomb.pkl"
    path.write_bytes(pickle.dumps(_nested(40), protocol=4))
    assert path.stat().st_size < 1000
    assert pickle.loads(path.read_bytes())  # loads at once: the references are shared
    rules = {(f.rule, f.severity) for f in scan_paths([path]).findings}
    assert ("pickle.expansion-bomb", "error") in rules


def test_a_big_ordinary_structure_and_a_cycle_are_not(tmp_path: Path) -> None:
    cyclic: list[object] = [1, 2]
    cyclic.append(cyclic)
    for name, value in (("big", {f"k{i}": [i] * 20 for i in range(20_000)}), ("cycle", cyclic)):
        path = tmp_path / f"{name}.pkl"
        path.write_bytes(pickle.dumps(value, protocol=4))
        assert scan_paths([path]).findings == [], name
