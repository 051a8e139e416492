"""Bytecode verdicts: forged pycs found among many, in child processes too, and cached."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
from importlib._bootstrap_external import _code_to_timestamp_pyc  # type: ignore[attr-defined]
from pathlib import Path

import pytest

from ftmanifest.statcache import StatCache, StatKey
from ftmanifest.verify import bytecode
from ftmanifest.verify.bytecode import Compiled, mismatched
from tests.conftest import settle


def _modules(folder: Path, n: int) -> list[Compiled]:
    items = []
    for i in range(n):
        source = folder / f"m{i}.py"
        source.write_text(f"X = {i}\n")
        pyc = str(py_compile.compile(str(source), doraise=True))
        digest = "sha256:" + hashlib.sha256(source.read_bytes()).hexdigest()
        items.append(Compiled(str(source), pyc, digest))
    return items


def _forge(item: Compiled) -> None:
    source = Path(item.source)
    st = source.stat()
    code = compile("X = 'forged'\n", item.source, "exec", dont_inherit=True)
    Path(item.pyc).write_bytes(bytes(_code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size)))


@pytest.mark.parametrize("n", [5, 2 * bytecode.PER_PROCESS + 10])
def test_the_forged_pyc_is_found_and_the_rest_cached(tmp_path: Path, n: int) -> None:
    items = _modules(tmp_path, n)
    _forge(items[3])
    assert importlib.util.cache_from_source(items[3].source) == items[3].pyc
    settle(*(Path(i.pyc) for i in items))
    with StatCache(tmp_path / "cache") as cache:
        assert mismatched(items, cache) == {items[3].pyc: "other code than the source compiles to"}
        cache.flush()
        judged = cache.lookup_many([(i.pyc, _key(i.pyc)) for i in items], bytecode.cache_algo())
    assert set(judged) == {i.pyc for i in items} - {items[3].pyc}  # the forged one never


def test_a_source_changed_since_it_was_verified_is_not_judged(tmp_path: Path) -> None:
    (item,) = _modules(tmp_path, 1)
    Path(item.source).write_text("X = 'later'\n")
    assert "source changed" in mismatched([item], None)[item.pyc]


def _key(path: str) -> StatKey:
    return StatKey.of(os.stat(path))
