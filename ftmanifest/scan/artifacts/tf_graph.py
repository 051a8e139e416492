"""TensorFlow graphs (``saved_model.pb``, frozen ``.pb``): the operators a load would run.

Layer: judging rooms - edge of the scanner (reads one file).  Read as protobuf by the
field numbers of TensorFlow's ``saved_model.proto``, ``meta_graph.proto``,
``graph.proto``, ``function.proto`` and ``node_def.proto``: a ``SavedModel`` holds
``meta_graphs`` (2), each a ``graph_def`` (2); a ``GraphDef`` holds ``node`` (1) and a
function ``library`` (2) whose functions (1) hold ``node_def`` (3).  Every node's ``op``
(2) is judged:

- ``PyFunc``, ``PyFuncStateless`` and ``EagerPyFunc`` call Python registered
  in the process that runs the graph: an error (``tf.python-op``);
- operators that read or write files by a path the graph carries
  (``ReadFile``, ``WriteFile``, ``MatchingFiles``, ``ImmutableConst``, the file
  datasets) are a warning (``tf.file-op``);
- bytes that are not such a message are an error (``tf.unreadable``).

A frozen graph (any other ``.pb``) is read as a ``GraphDef``.  Node
attributes (constant tensors, shapes) are skipped by seeking.
"""

from __future__ import annotations

from pathlib import Path

from ftmanifest.findings import Finding
from ftmanifest.held import open_binary
from ftmanifest.scan.artifacts.protowire import BYTES, Malformed, Reader
from ftmanifest.scan.unscanned import REEXPORT_HINT, malformed

PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
FILE_OPS = frozenset(
    {"ReadFile", "WriteFile", "MatchingFiles", "ImmutableConst"}
    | {"TextLineDataset", "TFRecordDataset", "FixedLengthRecordDataset"}
    | {"TextLineDatasetV2", "TFRecordDatasetV2", "FixedLengthRecordDatasetV2"}
)
SCHEMA: dict[str, dict[int, str]] = {
    "saved_model": {2: "meta_graph"},
    "meta_graph": {2: "graph"},
    "graph": {1: "node", 2: "library"},
    "library": {1: "function"},
    "function": {3: "node"},
    "node": {1: "name", 2: "op"},
}
MAX_DEPTH = 32
MAX_NAME = 1 << 16


def scan_tf_graph(path: Path) -> list[Finding]:
    where = str(path)
    top = "saved_model" if path.name == "saved_model.pb" else "graph"
    ops: dict[str, str] = {}  # op -> first node name
    try:
        with open_binary(path) as fh:
            size = fh.seek(0, 2)
            fh.seek(0)
            _message(Reader(fh, size), top, size, ops, 0)
    except Malformed as exc:
        what = "SavedModel" if top == "saved_model" else "TensorFlow GraphDef"
        return [
            malformed(
                where,
                "tf.unreadable",
                f"not a well-formed {what}: {exc}",
                expected=f"a {what} protobuf",
                hint=REEXPORT_HINT,
            )
        ]
    return [_finding(where, op, node) for op, node in sorted(ops.items()) if _judged(op)]


def _judged(op: str) -> bool:
    return op in PYTHON_OPS or op in FILE_OPS


def _message(r: Reader, kind: str, end: int, ops: dict[str, str], depth: int) -> dict[str, str]:
    if depth > MAX_DEPTH:
        raise Malformed(f"messages nested over {MAX_DEPTH} deep")
    fields, strings = SCHEMA[kind], {}
    while r.pos < end:
        number, wire = r.tag()
        role = fields.get(number)
        if role is None:
            r.skip(wire, end)
            continue
        if wire != BYTES:
            raise Malformed(f"field {number} of a {kind} at offset {r.pos} has the wrong type")
        n = r.length(end)
        if role in SCHEMA:
            _message(r, role, r.pos + n, ops, depth + 1)
        elif n > MAX_NAME:
            r.seek_to(r.pos + n, end)
        else:
            strings[role] = r.fh.read(n).decode("utf-8", "replace")
    if r.pos != end:
        raise Malformed(f"a {kind} overruns its length at offset {r.pos}")
    if kind == "node" and "op" in strings:
        ops.setdefault(strings["op"], strings.get("name", "?"))
    return strings


def _finding(where: str, op: str, node: str) -> Finding:
    python = op in PYTHON_OPS
    return Finding(
        kind="unsafe-model",
        rule="tf.python-op" if python else "tf.file-op",
        message=f"node {node!r} runs {op}, "
        + (
            "which calls Python in the process that runs the graph"
            if python
            else "which reads or writes a file by a path the graph holds"
        ),  # fmt: skip
        path=where,
        field=op,
        severity="error" if python else "warning",
        expected="graph operators that compute on tensors",
        observed=op,
        hint="load this graph only from a source you trust; re-export it without the operator",
        extra={"op": op, "node": node},
    )
