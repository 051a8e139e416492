"""HDF5 files (Keras ``.h5`` models and weights): read by h5py in a child process.

Layer: judging rooms - edge of the scanner (runs one child per file).  libhdf5 is C code
that has crashed on hostile files more than once, so it never runs in the scanning
process: a child with a memory limit and a time limit reads the file's *metadata*
through the descriptor the scan holds (never by name again), and hands back JSON.
Payloads of numeric datasets are never read.  Judged:

- the root's ``model_config`` and ``training_config`` (what ``load_model``
  rebuilds) go to the Keras config judge: a Lambda layer's marshalled bytecode
  (Keras 3's ``__lambda__``, or Keras 2's ``function_type: "lambda"``) is an
  error, objects from outside Keras a warning;
- an **external link** or **external storage** makes the reader open another
  file, named by this one (``hdf5.external-file``, an error); a **virtual
  dataset** maps other files' data in (the same rule);
- a dataset compressed by a filter that is not built into libhdf5 or h5py
  makes the reader load a plugin (native code) from ``HDF5_PLUGIN_PATH``
  (``hdf5.filter-plugin``, a warning); the child loads none;
- every string attribute and string dataset goes to the text scanner; a
  dataset of a type that is neither numbers nor strings is not judged (an
  error naming it).

Without h5py the file is not scanned (``hdf5.no-reader``, an error saying to
install it); a file h5py cannot read, or a child that dies, is
``hdf5.unreadable``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.held import kept
from ftmanifest.scan.artifacts.keras_model import judge_config
from ftmanifest.scan.unscanned import REEXPORT_HINT, malformed, part_not_scanned

MAGIC = b"\x89HDF\r\n\x1a\n"
TIMEOUT_S = 120
MEMORY_LIMIT = 4 << 30
MAX_STRINGS = 64 << 20  # string bytes handed back; past it the rest is not judged
KERAS_ATTRS = ("model_config", "training_config")

CHILD = Path(__file__).with_name("hdf5_child.py")  # run by path: stdlib and h5py only


def scan_hdf5(path: Path, text_scanner: Any) -> list[Finding]:
    """Findings for one HDF5 file; see the module docstring."""
    where = str(path)
    if not have_reader():
        why = "not scanned: an HDF5 file is read with h5py, which is not installed"
        return [part_not_scanned(where, why, rule="hdf5.no-reader",
                                 hint="pip install h5py, then scan again")]  # fmt: skip
    report = _read(path)
    if isinstance(report, Finding):
        return [report]
    out: list[Finding] = []
    for key in KERAS_ATTRS:
        if key in report["keras"]:
            member = f"attribute {key}"
            out += judge_config(where, member, report["keras"][key].encode("utf-8"))
    for name, how, files in report["external"]:
        out.append(_external(where, name, how, files))
    for name, code, fname in report["plugins"]:
        out.append(_plugin(where, name, code, fname))
    for name, why in report["unjudged"]:
        out.append(part_not_scanned(where, f"{name}: {why}", name, "hdf5.not-judged",
                                    "inspect it by hand; it was not checked"))  # fmt: skip
    if text_scanner is not None:
        for name, value in report["strings"]:
            out += text_scanner(value, path=where, extra={"member": name})
    return out


def have_reader() -> bool:
    return importlib.util.find_spec("h5py") is not None


def _read(path: Path) -> dict[str, Any] | Finding:
    where = str(path)
    fd = kept(path)
    own = fd is None
    if own:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    assert fd is not None
    env = {"HDF5_PLUGIN_PATH": os.devnull, "PATH": os.defpath}
    args = [sys.executable, "-I", str(CHILD), str(fd), str(MEMORY_LIMIT), str(MAX_STRINGS)]
    try:
        done = subprocess.run(args, pass_fds=(fd,), env=env, capture_output=True,
                              timeout=TIMEOUT_S, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        why = f"not scanned: reading its HDF5 metadata took over {TIMEOUT_S} s"
        return part_not_scanned(where, why, rule="hdf5.unreadable", hint=REEXPORT_HINT)
    finally:
        if own:
            os.close(fd)
    if done.returncode != 0:
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        why = last[0][:300] or f"the reader died (status {done.returncode})"
        return malformed(where, "hdf5.unreadable", f"h5py cannot read it: {why}",
                         expected="an HDF5 file h5py reads", hint=REEXPORT_HINT)  # fmt: skip
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        return malformed(where, "hdf5.unreadable", "the HDF5 reader's answer is not JSON",
                         hint=REEXPORT_HINT)  # fmt: skip
    return report


def _external(where: str, name: str, how: str, files: list[str]) -> Finding:
    return Finding(
        kind="unsafe-model",
        rule="hdf5.external-file",
        message=f"{name} is an HDF5 {how}: reading it opens {', '.join(files) or 'another file'}, "
        "which this file names and nothing pins",
        path=where,
        field=name,
        severity="error",
        expected="datasets stored in the file itself",
        observed=f"{how} to {', '.join(files)}",
        hint="re-save the model so every dataset is inside the file",
        extra={"member": name},
    )


def _plugin(where: str, name: str, code: int, fname: str) -> Finding:
    return Finding(
        kind="unsafe-model",
        rule="hdf5.filter-plugin",
        message=f"{name} is compressed by HDF5 filter {code} ({fname or 'unnamed'}), which "
        "libhdf5 loads as a plugin (native code) from HDF5_PLUGIN_PATH when the data is read",
        path=where,
        field=name,
        severity="warning",
        expected="filters built into libhdf5 (deflate, shuffle, fletcher32, szip, nbit, "
        "scaleoffset) or h5py (lzf)",
        observed=f"filter {code}",
        hint="load it only with a plugin path you trust, or re-save it with a built-in filter",
        extra={"member": name, "filter": code},
    )
