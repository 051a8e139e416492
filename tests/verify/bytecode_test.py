"""Bytecode verdicts: forged pycs found among many, in child processes too, and cached."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


# --- processes started together on one cache ------------------------------------


def _counting(monkeypatch: pytest.MonkeyPatch, started: threading.Event) -> list[int]:
    """How many pycs each ``_compare`` call compiles; the first call lingers so that a
    second process arrives while it runs."""
    counts: list[int] = []
    real = bytecode._compare

    def compare(items: list[Compiled]) -> dict[str, str]:
        counts.append(len(items))
        started.set()
        time.sleep(0.3)
        return real(items)

    monkeypatch.setattr(bytecode, "_compare", compare)
    return counts


def _together(
    items: list[Compiled], first: Path, second: Path, started: threading.Event
) -> list[dict[str, str]]:
    """``mismatched`` on a cache in ``first``, and once it compiles (``started``), on one
    in ``second`` (each its own connection and open lock file, as two processes have)."""
    answers: list[dict[str, str]] = [{}, {}]

    def judge(n: int, folder: Path) -> None:
        with StatCache(folder) as cache:
            answers[n] = mismatched(items, cache)

    a = threading.Thread(target=judge, args=(0, first))
    a.start()
    assert started.wait(30)
    judge(1, second)
    a.join(30)
    return answers


FORGED = "other code than the source compiles to"


@pytest.mark.parametrize(
    ("caches", "second_compiles"),
    [(("cache", "cache"), 1), (("a", "b"), "all")],  # the control: a cache each
    ids=["one-cache", "control-two-caches"],
)
def test_ranks_on_one_cache_compile_each_pyc_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caches: tuple[str, str],
    second_compiles: int | str,
) -> None:  # fmt: skip
    """On one cold cache the second compiles only the forged pyc again (its verdict is
    never stored); each on its own cache compiles everything."""
    items = _modules(tmp_path, bytecode.PER_PROCESS + 20)
    _forge(items[7])
    settle(*(Path(i.pyc) for i in items))
    counts = _counting(monkeypatch, started := threading.Event())
    first, second = (tmp_path / c for c in caches)
    forged = {items[7].pyc: FORGED}
    assert _together(items, first, second, started) == [forged, forged]
    assert counts == [len(items), len(items) if second_compiles == "all" else second_compiles]


def test_a_lock_file_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    """A link planted at the lock's name (to a file elsewhere) is neither opened nor
    created through: the process judges alone, and finds the forged pyc."""
    items = _modules(tmp_path, bytecode.PER_PROCESS + 1)
    _forge(items[0])
    settle(*(Path(i.pyc) for i in items))
    cache_dir, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    cache_dir.mkdir()
    (cache_dir / bytecode.LOCK_NAME).symlink_to(elsewhere)
    with StatCache(cache_dir) as cache:
        assert mismatched(items, cache) == {items[0].pyc: FORGED}
    assert not elsewhere.exists()


def test_a_lock_held_past_the_wait_costs_speed_not_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process that never lets go (stopped, hung): after ``WAIT_SECONDS`` this
    one judges on its own, and a forged pyc is still found."""
    items = _modules(tmp_path, bytecode.PER_PROCESS + 1)
    _forge(items[0])
    settle(*(Path(i.pyc) for i in items))
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    with _lock_held(cache_dir):
        monkeypatch.setattr(bytecode, "WAIT_SECONDS", 0.5)
        began = time.monotonic()
        with StatCache(cache_dir) as cache:
            found = mismatched(items, cache)
        assert time.monotonic() - began >= 0.5
        assert found == {items[0].pyc: FORGED}


def test_a_broken_cache_does_not_wait_for_a_lock_it_could_not_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache that cannot be opened holds no verdict another process could leave:
    waiting for the lock would only delay the same compilation."""
    items = _modules(tmp_path, bytecode.PER_PROCESS + 1)
    _forge(items[0])
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / "statcache-v1.sqlite3").write_bytes(b"not a database" * 100)
    with _lock_held(cache_dir):
        monkeypatch.setattr(bytecode, "WAIT_SECONDS", 30.0)
        began = time.monotonic()
        with StatCache(cache_dir) as cache:
            assert not cache.enabled
            assert mismatched(items, cache) == {items[0].pyc: FORGED}
        assert time.monotonic() - began < 15


HOLD = """\
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""


@contextmanager
def _lock_held(cache_dir: Path) -> Iterator[None]:
    """Another process holds the cache folder's judging lock until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(cache_dir / bytecode.LOCK_NAME)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.kill()
        holder.wait()
