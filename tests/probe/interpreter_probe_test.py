"""The interpreter probe: stdlib only, runnable by any Python, and what it reports is true.

``ftmanifest run`` executes the probe's file with the command's own interpreter
(no ftmanifest there), so these tests run it with the base interpreter in
isolated mode, and check each fact it reports against what the interpreter
really does: which pyc the loader runs, which variables the process started with.
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ftmanifest.probe import interpreter
from ftmanifest.probe.records import distributions, record_index

PROBE = Path(interpreter.__file__)


def _run(*argv: str, env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120, env=env)
    return json.loads(done.stdout)


def test_the_base_interpreter_runs_the_file_without_ftmanifest() -> None:
    base = getattr(sys, "_base_executable", sys.executable)
    seen = _run(base, "-I", str(PROBE))
    assert seen["format"] == interpreter.FORMAT
    assert seen["flags"]["isolated"] == 1
    assert not any(m["name"].startswith("ftmanifest") for m in seen["modules"])
    assert seen["version_info"] == list(sys.version_info[:3])
    assert seen["stdlib"] and all(os.path.isabs(p) for p in seen["stdlib"])


def test_the_source_runs_with_python_c() -> None:
    seen = _run(sys.executable, "-c", PROBE.read_text("utf-8"))
    assert seen["executable"] == sys.executable
    assert seen["venv"] == (sys.prefix != sys.base_prefix)
    names = {d["name"] for d in seen["distributions"]}
    assert "pydantic" in names  # this venv's distributions, with their RECORD
    assert all(d["record"] for d in seen["distributions"] if d["name"] == "pydantic")


def test_the_stdlib_folders_are_the_base_installation_s_not_the_venv_s() -> None:
    seen = interpreter.observe()
    assert all(not p.startswith(sys.prefix + os.sep) or sys.prefix == sys.base_prefix
               for p in seen["stdlib"])  # fmt: skip


def test_variables_are_reported_as_the_process_started() -> None:
    """A process that removes PYTHONPATH from its environment after start-up (as code that
    wants to hide cannot avoid doing only after it ran) is still seen started with it."""
    code = (
        "import os, json, sys\n"
        f"sys.path.insert(0, {str(PROBE.parent)!r})\n"
        "import interpreter\n"
        "del os.environ['PYTHONPATH']\n"
        "print(json.dumps(interpreter._variables()))\n"
    )
    env = {**os.environ, "PYTHONPATH": "/nonexistent-ftm"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    seen = json.loads(done.stdout)
    if seen["startup"] is None:
        pytest.skip("no /proc/self/environ here")
    assert seen["startup"]["PYTHONPATH"] == "/nonexistent-ftm"
    assert "PYTHONPATH" not in seen["now"]


def _module(tmp_path: Path, text: str = "X = 1\n") -> tuple[Path, Path]:
    source = tmp_path / "mod.py"
    source.write_text(text)
    return source, Path(importlib.util.cache_from_source(str(source)))


def test_a_timestamp_pyc_is_used_until_the_source_s_mtime_moves(tmp_path: Path) -> None:
    source, pyc = _module(tmp_path)
    py_compile.compile(str(source), doraise=True)
    assert interpreter.pyc_state(str(source), str(pyc))["state"] == "used"
    assert interpreter.compiled_matches(str(source), str(pyc))
    later = time.time() + 10
    os.utime(source, (later, later))
    assert interpreter.pyc_state(str(source), str(pyc))["state"] == "stale"


def test_an_unchecked_hash_pyc_is_used_whatever_the_source_says(tmp_path: Path) -> None:
    source, pyc = _module(tmp_path)
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(str(source), doraise=True, invalidation_mode=mode)
    source.write_text("X = 2222\n")  # the loader never looks: the old code runs
    state = interpreter.pyc_state(str(source), str(pyc))
    assert (state["state"], state["kind"]) == ("used", "unchecked-hash")
    assert not interpreter.compiled_matches(str(source), str(pyc))


def test_a_checked_hash_pyc_is_stale_once_the_source_changes(tmp_path: Path) -> None:
    source, pyc = _module(tmp_path)
    mode = py_compile.PycInvalidationMode.CHECKED_HASH
    py_compile.compile(str(source), doraise=True, invalidation_mode=mode)
    assert interpreter.pyc_state(str(source), str(pyc))["state"] == "used"
    source.write_text("X = 2\n")
    assert interpreter.pyc_state(str(source), str(pyc))["state"] == "stale"


def test_a_missing_pyc_is_absent(tmp_path: Path) -> None:
    source, pyc = _module(tmp_path)
    assert interpreter.pyc_state(str(source), str(pyc))["state"] == "absent"


def test_record_rows_are_read_as_pip_writes_them(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "demo-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    (info / "RECORD").write_text(
        "demo/a.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
        '"demo/with,comma.py",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n'
        "demo/b.py,md5=abc,3\n"
        "demo/__pycache__/a.cpython-311.pyc,,\n"
        "demo-1.0.dist-info/RECORD,,\n"
    )
    dists = distributions(interpreter._distributions([str(site)]))
    assert [(d.name, d.version) for d in dists] == [("demo", "1.0")]
    index = record_index(dists)
    empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    base = os.path.realpath(site)
    assert index.get(f"{base}/demo/a.py").digest == empty  # type: ignore[union-attr]
    assert index.get(f"{base}/demo/with,comma.py").digest == empty  # type: ignore[union-attr]
    got = index.get(f"{base}/demo/b.py")
    assert got is not None and got.digest is None and "md5" in (got.problem or "")
    assert index.get(f"{base}/demo/missing.py") is None
