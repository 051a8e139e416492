"""Bytecode the interpreter ran instead of a source: is it that source's compilation?

Layer: judging rooms (verify).  ``SourceFileLoader`` runs the ``.pyc`` in
``__pycache__`` (or under ``PYTHONPYCACHEPREFIX``) without reading the source
whenever the pyc's header matches: the source's mtime and size for a
timestamp pyc, nothing at all for an unchecked hash-based one.  Other code
compiled and stamped with the real file's mtime and size therefore runs while
the source, its RECORD hash and its git blob all look right.  So a pyc that
the loader would use (``probe.interpreter.pyc_state``) must hold exactly the
code this interpreter compiles from the verified source
(``probe.interpreter.compare_bytecode``).

Compiling every module torch and transformers import takes seconds, so a
verdict is kept in the stat cache: under ``pyc-compiles:<cache tag>:opt<N>``
the pyc's path and stat key map to the sha256 of the source it was found to be
the compilation of.  A later start with the same pyc (same inode, size, mtime,
ctime) and the same source digest compiles nothing.  A first judgement of many
files is spread over processes of this same interpreter (the probe file run
with ``--compare``), one a CPU, and holds a lock in the cache's folder: the
ranks of a job started together on one node wait for the first, then read its
verdicts back instead of each compiling everything again.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from ftmanifest.hashing.cpus import default_workers
from ftmanifest.probe import interpreter as probe
from ftmanifest.statcache import StatCache, StatKey

PER_PROCESS = 150  # fewer than this many pycs to compile: no child process is worth it
LOCK_NAME = "pyc-judge.lock"  # in the stat cache's folder
WAIT_SECONDS = 300.0  # for another process's first judgement; then judge alone


@dataclass(frozen=True)
class Compiled:
    """One pyc the loader would run, and the verified source it stands for."""

    source: str
    pyc: str
    source_digest: str
    """``sha256:<hex>`` of the source as verified."""


def cache_algo(optimize: int | None = None) -> str:
    level = sys.flags.optimize if optimize is None else optimize
    return f"pyc-compiles:{sys.implementation.cache_tag}:opt{level}"


def mismatched(items: Iterable[Compiled], cache: StatCache | None) -> dict[str, str]:
    """The pycs among ``items`` that are not the compilation of their source:
    pyc path -> what was found (``other code``, ``unreadable: ...``)."""
    algo = cache_algo()
    keys: dict[str, StatKey] = {}
    bad: dict[str, str] = {}
    todo = []
    for item in items:
        try:
            keys[item.pyc] = StatKey.of(os.stat(item.pyc))
            todo.append(item)
        except OSError as exc:
            bad[item.pyc] = f"unreadable: {exc.strerror or exc}"
    todo = _unknown(todo, keys, cache, algo)
    if cache is None or not cache.enabled or len(todo) < PER_PROCESS:  # nothing to wait for
        bad.update(_judged(todo, keys, cache, algo))
        return bad
    with _one_at_a_time(cache) as waited:
        if waited:  # another process judged meanwhile: what it stored is known now
            todo = _unknown(todo, keys, cache, algo)
        bad.update(_judged(todo, keys, cache, algo))
        cache.flush()  # before the next process looks
    return bad


def _unknown(
    items: list[Compiled], keys: dict[str, StatKey], cache: StatCache | None, algo: str
) -> list[Compiled]:
    """The items whose pyc, as stat'ed, the cache holds no verdict for."""
    if cache is None:
        return items
    known = cache.lookup_many([(i.pyc, keys[i.pyc]) for i in items], algo)
    return [item for item in items if known.get(item.pyc) != item.source_digest]


def _judged(
    todo: list[Compiled], keys: dict[str, StatKey], cache: StatCache | None, algo: str
) -> dict[str, str]:
    """Compile and compare ``todo``; the verdict of each pyc still as stat'ed goes to the cache."""
    started = time.time_ns()
    bad = _compare(todo)
    if cache is not None:
        for item in todo:
            if item.pyc in bad:
                continue
            try:
                after = StatKey.of(os.stat(item.pyc))
            except OSError:
                continue
            if after == keys[item.pyc]:  # the pyc judged is the one found before
                cache.put(item.pyc, algo, after, item.source_digest, hashed_at_ns=started)
    return bad


@contextmanager
def _one_at_a_time(cache: StatCache) -> Iterator[bool]:
    """Hold the cache folder's judging lock while compiling, so that processes
    started together on one cache (a job's ranks on a node) compile each pyc once:
    the others wait, then read the verdicts back.  Yields whether another process
    held it.  A lock that cannot be opened or had within ``WAIT_SECONDS`` costs
    only speed: the process then judges on its own."""
    try:
        fd = os.open(cache.directory / LOCK_NAME,
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)  # fmt: skip
    except OSError:
        yield False
        return
    try:
        waited, deadline = False, time.monotonic() + WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = True
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            except OSError:
                break
        yield waited
    finally:
        os.close(fd)  # releases the lock


def _compare(items: list[Compiled]) -> dict[str, str]:
    rows = [{"source": i.source, "pyc": i.pyc, "digest": i.source_digest} for i in items]
    optimize = sys.flags.optimize
    workers = default_workers(len(rows) // PER_PROCESS)  # a CPU each, at most
    if workers < 2 or not sys.executable:
        return probe.compare_bytecode(rows, optimize)
    chunks = [rows[i::workers] for i in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        answers = list(pool.map(lambda chunk: _in_child(chunk, optimize), chunks))
    return {pyc: why for answer in answers for pyc, why in answer.items()}


def _in_child(rows: list[dict[str, str]], optimize: int) -> dict[str, str]:
    """``compare_bytecode`` in a child of this interpreter (-I: nothing of the
    environment or the user's site is read; compiling needs neither)."""
    argv = [sys.executable, "-I", probe.__file__, "--compare", str(optimize)]
    try:
        done = subprocess.run(  # noqa: S603 - this interpreter, the probe file, no shell
            argv, input=json.dumps(rows), capture_output=True, text=True, check=True
        )
        answer = json.loads(done.stdout)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return probe.compare_bytecode(rows, optimize)  # judged here instead
    return {str(k): str(v) for k, v in answer.items()}
