"""GGUF models: the header, every metadata value and the tensor table, by the GGUF spec.

Layer: judging rooms - edge of the scanner (reads one file).  A GGUF file is ``GGUF``, a
version (1 to 3), the tensor and key-value counts (32-bit in version 1,
64-bit after), the key-value pairs (typed: numbers, bools, strings and arrays
of them), the tensor infos (name, up to four dimensions, a ggml type, an
offset) and the aligned data.  Nothing in it is code, with one exception: a
chat template (``tokenizer.chat_template`` and its named variants) is a Jinja
template that a runtime renders, and a renderer outside a sandbox runs what
it reaches.  So:

- a template that reaches an attribute or item whose name starts with ``_``
  (``__class__``, ``__globals__``: the way out of any Jinja sandbox) is an
  error (``gguf.chat-template-escape``), and so is every other route to one
  (``jinja_names``): a format string whose fields read attributes or items, a
  name built at run time (``'_'*2 ~ ...``, ``'%c'|format(95)``, ``|join``)
  used as an attribute or item, any string built to hold ``__``; a call of
  anything but the string, list and dict methods and the helpers chat
  templates use is a warning
  (``gguf.chat-template-call``); a template Jinja cannot parse is a warning;
- every string value goes to the text scanner (arrays in bulk);
- a header, value or tensor info that breaks the spec, or data past the end
  of the file, is an error (``gguf.unreadable``), never clean.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, Any

from ftmanifest.findings import Finding
from ftmanifest.held import open_binary
from ftmanifest.scan.artifacts.jinja_names import built_strings
from ftmanifest.scan.unscanned import REEXPORT_HINT, malformed, part_not_scanned

MAGIC = b"GGUF"
MAX_COUNT = 1 << 24  # key-values, tensors, array items: far past any real model
MAX_STRING = 64 << 20  # a chat template or a vocabulary entry is much smaller
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_DEPTH = 8  # arrays of arrays
DEFAULT_ALIGNMENT = 32
TEXT_BATCH = 1 << 20  # array strings handed to the text scanner this many bytes at a time
TEMPLATE_KEY = "tokenizer.chat_template"
# gguf_type: fixed-size scalars (struct format), 7 is BOOL, 8 STRING, 9 ARRAY
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B"}
_SCALARS |= {10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# what chat templates call: str/list/dict methods and the helpers renderers provide
SAFE_METHODS = frozenset(
    "strip lstrip rstrip split rsplit splitlines startswith endswith upper lower title "
    "capitalize replace format join count find rfind index get items keys values append "
    "extend pop copy isdigit isspace isalpha isalnum removeprefix removesuffix".split()
)
SAFE_FUNCTIONS = frozenset("raise_exception range namespace dict strftime_now len zip".split())


class _Malformed(Exception):
    pass


def scan_gguf(path: Path, scanner: Callable[..., list[Finding]] | None) -> list[Finding]:
    where = str(path)
    judge = _Judge(where, scanner)
    try:
        with open_binary(path) as fh:
            size = fh.seek(0, 2)
            fh.seek(0)
            _read_file(_Reader(fh, size), judge)
    except _Malformed as exc:
        bad = malformed(
            where,
            "gguf.unreadable",
            f"not a well-formed GGUF: {exc}",
            expected="a GGUF file by the spec (versions 1 to 3)",
            hint=REEXPORT_HINT,
        )
        return [*judge.out, bad]
    return judge.out + judge.flush()


class _Reader:
    def __init__(self, fh: IO[bytes], size: int) -> None:
        self.fh, self.size = fh, size

    def take(self, n: int) -> bytes:
        if n > self.size - self.fh.tell():
            raise _Malformed(f"needs {n} bytes at offset {self.fh.tell()}, past the end")
        return self.fh.read(n)

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def count(self, wide: bool, what: str) -> int:
        n = int(self.unpack("<Q" if wide else "<I"))
        if n > MAX_COUNT:
            raise _Malformed(f"{n} {what} is over the cap of {MAX_COUNT}")
        return n

    def string(self, wide: bool) -> str:
        n = int(self.unpack("<Q" if wide else "<I"))
        if n > MAX_STRING:
            raise _Malformed(f"a string of {n} bytes at offset {self.fh.tell()}")
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Malformed(f"a string that is not UTF-8 at offset {self.fh.tell()}") from exc


def _read_file(r: _Reader, judge: _Judge) -> None:
    if r.take(4) != MAGIC:
        raise _Malformed("it does not start with GGUF")
    version = int(r.unpack("<I"))
    if version not in (1, 2, 3):
        raise _Malformed(f"version {version} (known: 1 to 3)")
    wide = version >= 2  # version 1 wrote counts and string lengths as 32 bits
    tensors, kvs = r.count(wide, "tensors"), r.count(wide, "key-value pairs")
    alignment = DEFAULT_ALIGNMENT
    for _ in range(kvs):
        key = r.string(wide)
        kind = int(r.unpack("<I"))
        value = _value(r, kind, wide, key, judge, 0)
        if key == "general.alignment":
            if kind != 4 or not isinstance(value, int) or value <= 0 or value & (value - 1):
                raise _Malformed(f"general.alignment is {value!r}, not a power of two")
            alignment = value
    infos = []
    for _ in range(tensors):
        name = r.string(wide)
        dims = int(r.unpack("<I"))
        if dims > MAX_DIMS:
            raise _Malformed(f"tensor {name!r} has {dims} dimensions (at most {MAX_DIMS})")
        for _ in range(dims):
            r.unpack("<Q")
        r.unpack("<I")  # ggml type
        infos.append((name, int(r.unpack("<Q"))))
    data = -(-r.fh.tell() // alignment) * alignment
    for name, offset in infos:
        if offset % alignment or data + offset > r.size:
            raise _Malformed(
                f"tensor {name!r} at data offset {offset} is misaligned or past the end"
            )


def _value(r: _Reader, kind: int, wide: bool, key: str, judge: _Judge, depth: int) -> Any:
    if kind in _SCALARS:
        return r.unpack(_SCALARS[kind])
    if kind == _STRING:
        text = r.string(wide)
        judge.text(key, text)
        return text
    if kind == _ARRAY:
        if depth >= MAX_DEPTH:
            raise _Malformed(f"arrays nested over {MAX_DEPTH} deep in {key!r}")
        item = int(r.unpack("<I"))
        n = r.count(wide, "array items")
        if item in _SCALARS:  # skipped whole: numbers say nothing
            r.take(n * struct.calcsize(_SCALARS[item]))
            return None
        for _ in range(n):
            _value(r, item, wide, key, judge, depth + 1)
        return None
    raise _Malformed(f"value type {kind} of {key!r} is not a GGUF type")


class _Judge:
    def __init__(self, where: str, scanner: Callable[..., list[Finding]] | None) -> None:
        self.where, self.scanner = where, scanner
        self.out: list[Finding] = []
        self.batch: list[str] = []
        self.batched = 0

    def text(self, key: str, value: str) -> None:
        if key == TEMPLATE_KEY or key.startswith(TEMPLATE_KEY + "."):
            self.out += judge_template(self.where, key, value)
        self.batch.append(value)
        self.batched += len(value)
        if self.batched >= TEXT_BATCH:
            self.out += self.flush()

    def flush(self) -> list[Finding]:
        if self.scanner is None or not self.batch:
            return []
        joined, self.batch, self.batched = "\n".join(self.batch), [], 0
        return list(self.scanner(joined, path=self.where, extra={"format": "gguf"}))


def judge_template(where: str, key: str, source: str) -> list[Finding]:
    """A chat template's findings: what it reaches (``_`` names) and what it calls."""
    try:
        from jinja2 import Environment, nodes
        from jinja2.exceptions import TemplateSyntaxError
    except ImportError:
        return [part_not_scanned(where, f"{key} not judged: install jinja2", key)]
    try:
        tree = Environment().parse(source)
    except (TemplateSyntaxError, RecursionError) as exc:
        why = f"Jinja cannot parse it ({exc})"
        rule = "gguf.chat-template-unparsable"
        return [_template(where, key, rule, "warning", why, "a template a renderer can read")]
    out = []
    built = built_strings(tree)
    escape = partial(_template, where, key, "gguf.chat-template-escape", "error")
    for node in _walk(tree, nodes.Node):
        name = None
        if isinstance(node, nodes.Getattr):
            name = node.attr
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            name = node.arg.value if isinstance(node.arg.value, str) else None
        elif isinstance(node, (nodes.Filter, nodes.Test)):
            name = _attribute_named(node, nodes)
        for why in built.reaches(node):
            out.append(escape(why, "attribute and item names written as constants"))
        if name is not None and name.startswith("_"):
            why = f"it reaches {name!r}, the way out of a Jinja sandbox"
            out.append(escape(why, "no attribute or item whose name starts with _"))
        if isinstance(node, nodes.Call):
            called = _called(node.node, nodes)
            if called is not None:
                want = "only string, list and dict methods and the chat helpers"
                rule = "gguf.chat-template-call"
                out.append(_template(where, key, rule, "warning", f"it calls {called}", want))
    return _unique(out)


def _attribute_named(node: Any, nodes: Any) -> str | None:
    """The attribute a filter or test reads by name: ``|attr('x')``, ``map(attribute='x')``,
    ``selectattr('x')``...; a dunder string among its arguments counts as one too."""
    consts = [a.value for a in node.args if isinstance(a, nodes.Const)]
    consts += [k.value.value for k in node.kwargs if isinstance(k.value, nodes.Const)]
    strings = [c for c in consts if isinstance(c, str)]
    if node.name == "attr" or node.name.endswith("attr"):
        return next((c for c in strings if c.startswith("_")), None)
    consts_by_key = [(k.key, k.value) for k in node.kwargs if isinstance(k.value, nodes.Const)]
    attribute = [value.value for key, value in consts_by_key if key == "attribute"]
    named = [c for c in attribute if isinstance(c, str) and c.startswith("_")]
    dunders = [c for c in strings if c.startswith("__")]
    return next(iter(named + dunders), None)


def _called(func: Any, nodes: Any) -> str | None:
    if isinstance(func, nodes.Getattr):
        return None if func.attr in SAFE_METHODS else f".{func.attr}()"
    if isinstance(func, nodes.Name):
        return None if func.name in SAFE_FUNCTIONS else f"{func.name}()"
    return "a computed function"


def _walk(node: Any, base: type) -> Iterator[Any]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(child for child in n.iter_child_nodes() if isinstance(child, base))


def _template(where: str, key: str, rule: str, severity: str, why: str, want: str) -> Finding:
    return Finding(
        kind="unsafe-model",
        rule=rule,
        message=f"chat template {key}: {why}",
        path=where,
        field=key,
        severity=severity,  # type: ignore[arg-type]
        expected=want,
        observed=why,
        hint="render chat templates only in a sandbox (transformers does); "
        "read the template before trusting the file",
        extra={"key": key},
    )


def _unique(found: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in found:
        if (f.rule, f.message) not in seen:
            seen.add((f.rule, f.message))
            out.append(f)
    return out
