"""Standard-library globals that only build data are not errors.

Other scanners' benign fixtures pickle ``len``, ``collections.deque``,
``decimal.Decimal``... and an error on each buried the real ones.  Each file
here is written by ``pickle.dumps`` of the real object (or spells the global
as a loader would meet it) and loads with ``pickle.loads``; the gadgets stay
errors.
"""

from __future__ import annotations

import collections
import collections.abc
import datetime
import decimal
import fractions
import pickle
import uuid
from pathlib import Path

import pytest

from ftmanifest.scan.engine import scan_paths

BENIGN = {
    "len": len,
    "dict": dict,
    "deque": collections.deque([1, 2]),
    "defaultdict": collections.defaultdict(list, {"a": [1]}),
    "iterable": collections.abc.Iterable,
    "decimal": decimal.Decimal("1.25"),
    "fraction": fractions.Fraction(1, 3),
    "datetime": datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.timezone.utc),
    "uuid": uuid.UUID(int=7),
}
GADGETS = {
    "getattr": b"cbuiltins\ngetattr\n(cbuiltins\nobject\nS'__subclasses__'\ntR.",
    "eval": b"cbuiltins\neval\n(S'1+1'\ntR.",
    "system": b"cos\nsystem\n(S'true'\ntR.",
    "import": b"cbuiltins\n__import__\n(S'os'\ntR.",
    "namedtuple": b"ccollections\nnamedtuple\n(S'T'\nS'a'\ntR.",
}


def _errors(path: Path) -> list[str]:
    return [f.observed or f.rule for f in scan_paths([path]).findings if f.severity == "error"]


@pytest.mark.parametrize("name", sorted(BENIGN))
@pytest.mark.parametrize("protocol", [2, 4])
def test_a_standard_data_global_is_not_an_error(tmp_path: Path, name: str, protocol: int) -> None:
    path = tmp_path / f"{name}.pkl"
    path.write_bytes(pickle.dumps(BENIGN[name], protocol=protocol))
    assert pickle.loads(path.read_bytes()) == BENIGN[name]
    assert _errors(path) == []


def test_a_future_feature_is_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "future.pkl"
    path.write_bytes(b"c__future__\nannotations\n.")
    assert pickle.loads(path.read_bytes()).compiler_flag  # a _Feature, nothing called
    assert _errors(path) == []


@pytest.mark.parametrize("name", sorted(GADGETS))
def test_gadgets_stay_errors(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.pkl"
    path.write_bytes(GADGETS[name])
    assert _errors(path), name
