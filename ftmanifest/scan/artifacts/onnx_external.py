"""An ONNX model's external data file, judged as that model's tensor bytes.

Layer: judging rooms - edge of the scanner (reads a folder's ONNX models).  A model
saved with ``save_as_external_data`` (every model over 2 GB) keeps its tensors in a
second file, raw numbers with no header, that no content judge recognises.  Such a file
is judged here when an ONNX model *in the same folder* names it in a tensor's
``external_data`` ``location``: the loader reads only the ranges the model names
(``offset``, ``length``) and never interprets the bytes as code.

- named by a model that is clean and every range fits the file: clean;
- named by a model that is not clean (unreadable, a location outside the
  folder): an error on the data file too (``onnx.external-data-owner``);
- a range that is not a number or runs past the file's end: an error
  (``onnx.external-data-range``);
- named by no model: ``None``, and the caller keeps its ``scan.unknown-format``.

A location with ``..``, an absolute one, or one whose links lead out names no
file of this folder (the model itself gets ``onnx.external-data-outside``).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from ftmanifest.findings import Finding
from ftmanifest.held import open_binary
from ftmanifest.scan.artifacts.onnx_model import (
    HEAD_BYTES,
    ExternalRef,
    _outside,
    looks_like_onnx,
    walk_onnx,
)

MAX_SIBLINGS = 4096  # files of a folder looked at for a model that names the data file


def judge_external_data(path: Path) -> list[Finding] | None:
    """Findings for ``path`` as the data of the folder's ONNX models, or None where
    no model there names it."""
    folder, where = path.parent, str(path)
    try:
        size = path.stat().st_size
        siblings = sorted(e.name for e in os.scandir(folder) if e.name != path.name)
    except OSError:
        return None
    out: list[Finding] = []
    named = False
    for name in siblings[:MAX_SIBLINGS]:
        model = folder / name
        refs = _naming(model, path.name)
        if not refs:
            continue
        named = True
        errors = [f for f in _model_findings(model) if f.severity == "error"]
        if errors:
            rules = ", ".join(sorted({f.rule for f in errors}))
            out.append(_finding(where, "onnx.external-data-owner", name,
                                f"is the external data of {name}, which is not clean ({rules})",
                                "a clean ONNX model", rules,
                                f"fix {name} first (scan it for its own findings)"))  # fmt: skip
        for ref in refs:
            why = _range_problem(ref, size)
            if why is not None:
                out.append(_finding(where, "onnx.external-data-range", ref.tensor,
                                    f"tensor {ref.tensor!r} of {name} {why}",
                                    f"offset + length within the file's {size} bytes",
                                    f"offset {ref.offset}, length {ref.length}",
                                    f"re-export {name} with its external data"))  # fmt: skip
    return out if named else None


def _naming(model: Path, data_name: str) -> list[ExternalRef]:
    """The references of ``model`` (an ONNX file) that read ``data_name`` beside it."""
    try:
        st = model.stat()
        if not model.is_file() or model.is_symlink():
            return []
        with open_binary(model) as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return []
    if not looks_like_onnx(head):
        return []
    refs = _walked(str(model), st.st_mtime_ns, st.st_size)[1]
    return [
        r
        for r in refs
        if _outside(model.parent, r.location) is None
        and os.path.normpath(r.location.replace("\\", "/")) == data_name
    ]


def _model_findings(model: Path) -> list[Finding]:
    st = model.stat()
    return _walked(str(model), st.st_mtime_ns, st.st_size)[0]


@lru_cache(maxsize=32)
def _walked(model: str, _mtime: int, _size: int) -> tuple[list[Finding], list[ExternalRef]]:
    """One walk per model version, however many data files it names."""
    return walk_onnx(Path(model), None)


def _range_problem(ref: ExternalRef, size: int) -> str | None:
    try:
        offset = int(ref.offset or "0")
        length = None if ref.length is None else int(ref.length)
    except ValueError:
        return "gives an offset or length that is not a number"
    if offset < 0 or (length is not None and length < 0):
        return "gives a negative offset or length"
    if offset + (length or 0) > size or offset > size:
        return "reads past the end of the file"
    return None


def _finding(
    where: str, rule: str, field: str, message: str, expected: str, observed: str, hint: str
) -> Finding:
    return Finding(kind="malformed", rule=rule, message=message, path=where, field=field,
                   severity="error", expected=expected, observed=observed, hint=hint)  # fmt: skip
