"""Check a safetensors file's header without loading any tensor.

Layer: judging rooms - pure core scanner.  Reads the 8-byte length and the JSON header
only, with the same rules the safetensors library enforces (length bounded by the file
and a cap, strict UTF-8 JSON object, no duplicate keys, known dtypes, byte sizes
matching shapes, offsets covering the data section contiguously), and hands every string
of the header to the text scanner: ``__metadata__`` keys and values, tensor names, and
any extra field of a tensor entry.  Every defect is a ``malformed`` finding; nothing
here raises on bad input.

Every check is linear in the header's size (itself capped at ``MAX_HEADER``):
shape sizes are bounded to 64 bits before any arithmetic and the element count
is folded left with an overflow check at each step, as the library does, so a
shape of 300,000 huge dimensions is rejected after two multiplications
(``math.prod`` over it took seconds per 10,000 dimensions).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.held import open_binary
from ftmanifest.manifest.jsonkeys import unique_keys
from ftmanifest.scan.unscanned import part_not_scanned

MAX_HEADER = 100_000_000  # the safetensors library's own cap
USIZE_MAX = 2**64 - 1  # the library's shape sizes and offsets are Rust usize
TENSOR_FIELDS = frozenset({"dtype", "shape", "data_offsets"})
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
}


class Malformed(Exception):
    """A safetensors header that breaks the format, with its scan rule."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


def _duplicate(key: str) -> Malformed:
    return Malformed("safetensors.duplicate-key", f"key {_short(key)!r} appears twice")


_pairs_hook = unique_keys(_duplicate)


def _no_constant(name: str) -> Any:
    raise Malformed("safetensors.header-not-json", f"non-standard JSON constant {name}")


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def check_safetensors(
    path: Path,
    *,
    text_scanner: Callable[..., list[Finding]] | None = None,
    max_header: int = MAX_HEADER,
) -> list[Finding]:
    """All findings for one safetensors file's header and metadata."""
    where = str(path)
    out: list[Finding] = []

    def bad(rule: str, message: str, **extra: Any) -> None:
        out.append(
            Finding(
                kind="malformed",
                rule=rule,
                message=message,
                path=where,
                severity="error",
                hint="re-export the file with safetensors.save_file; loaders reject it",
                extra=extra,
            )
        )

    try:
        with open_binary(path) as fh:
            size = fh.seek(0, 2)
            fh.seek(0)
            prefix = fh.read(8)
            if len(prefix) < 8:
                bad(
                    "safetensors.truncated", f"file is {size} bytes, shorter than the length prefix"
                )
                return out
            (n,) = struct.unpack("<Q", prefix)
            if n > max_header:
                bad(
                    "safetensors.header-too-large",
                    f"header length {n} exceeds the cap of {max_header} bytes",
                    header_length=n,
                )
                return out
            if n > size - 8:
                bad(
                    "safetensors.header-beyond-file",
                    f"header length {n} runs past the end of a {size}-byte file",
                    header_length=n,
                )
                return out
            raw = fh.read(n)
    except OSError as exc:
        why = f"cannot read file: {exc.strerror or exc}"
        return [part_not_scanned(where, why, rule="scan.unreadable", hint=None)]
    try:
        header = parse_header(raw)
    except Malformed as exc:
        bad(exc.rule, str(exc))
        return out
    try:
        check_tensors(header, size - 8 - n)
    except Malformed as exc:
        bad(exc.rule, str(exc))
    meta = header.get("__metadata__")
    if meta is not None and not isinstance(meta, dict):
        bad("safetensors.metadata-not-object", "__metadata__ is not a JSON object")
        meta = None
    for key, value in (meta or {}).items():
        if not isinstance(value, str):
            bad(
                "safetensors.metadata-not-string",
                f"__metadata__ value for {_short(key)!r} is {type(value).__name__}, not a string",
                metadata_key=key,
            )
        elif text_scanner is not None:
            out.extend(text_scanner(value, path=where, extra={"metadata_key": key}))
    if text_scanner is not None:
        out.extend(_scan_header_strings(header, meta or {}, where, text_scanner))
    return out


def _header_strings(header: dict[str, Any], meta: dict[str, Any]) -> Iterable[tuple[str, str]]:
    """(part, text) for every header string other than metadata values and dtypes."""
    for key in meta:
        yield "metadata-key", key
    for name, info in header.items():
        if name == "__metadata__":
            continue
        yield "tensor-name", name
        if isinstance(info, dict):
            for field, value in info.items():
                if field not in TENSOR_FIELDS:
                    yield "tensor-field", field
                    yield from (("tensor-field", s) for s in _strings(value))


def _strings(value: Any) -> Iterable[str]:
    """Strings inside a parsed JSON value, iteratively (no recursion limit)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def _scan_header_strings(
    header: dict[str, Any],
    meta: dict[str, Any],
    where: str,
    text_scanner: Callable[..., list[Finding]],
) -> list[Finding]:
    """One scanner call for all keys and names, one string per line, mapped back."""
    items = list(_header_strings(header, meta))
    if not items:
        return []
    # One line per string (newlines inside become spaces, keeping lengths).
    joined = "\n".join(text.replace("\n", " ").replace("\r", " ") for _, text in items)
    out = []
    for f in text_scanner(joined, path=where):
        part = items[(f.line or 1) - 1][0]
        # The string itself is never repeated: the finding's excerpt is redacted.
        extra = {k: v for k, v in f.extra.items() if k != "span"}
        extra["header_part"] = part
        out.append(f._replace(line=None, column=None, extra=extra))
    return out


def parse_header(raw: bytes) -> dict[str, Any]:
    """The header's JSON object, parsed strictly (``Malformed`` otherwise)."""
    if not raw.startswith(b"{"):
        raise Malformed("safetensors.header-not-json", "header does not start with '{'")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(
            "safetensors.header-not-utf8", f"header is not UTF-8 (byte {exc.start})"
        ) from None
    try:
        header = json.loads(text, object_pairs_hook=_pairs_hook, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            msg = f"header is not valid JSON: {exc.msg} at {exc.pos}"
        else:
            msg = "header is not valid JSON"
        raise Malformed("safetensors.header-not-json", msg) from None
    if not isinstance(header, dict):
        raise Malformed("safetensors.header-not-object", "header is not a JSON object")
    return header


def check_tensors(header: dict[str, Any], data_len: int) -> None:
    """Every tensor's dtype, shape and offsets tile ``data_len`` bytes with no overlap or gap
    (``Malformed`` naming the first that does not)."""
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        label = _short(name)
        if not isinstance(info, dict):
            raise Malformed("safetensors.bad-tensor", f"tensor {label!r} is not an object")
        dtype, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
            raise Malformed(
                "safetensors.bad-dtype", f"tensor {label!r} has unknown dtype {_short(str(dtype))}"
            )
        if not isinstance(shape, list) or not all(_uint(d) for d in shape):
            raise Malformed(
                "safetensors.bad-shape", f"tensor {label!r}: shape is not a list of sizes"
            )
        if not (isinstance(offs, list) and len(offs) == 2 and all(_uint(o) for o in offs)):
            raise Malformed(
                "safetensors.bad-offsets", f"tensor {label!r}: data_offsets is not [begin, end]"
            )
        begin, end = offs
        if begin > end:
            raise Malformed("safetensors.bad-offsets", f"tensor {label!r}: begin > end")
        if end > data_len:
            raise Malformed(
                "safetensors.data-out-of-bounds",
                f"tensor {label!r} ends at {end}, past the {data_len}-byte data section "
                "(truncated file?)",
            )
        count = numel(shape)
        bits = None if count is None else count * DTYPE_BITS[dtype]
        if bits is None or bits > USIZE_MAX:
            raise Malformed(
                "safetensors.shape-overflow",
                f"tensor {label!r}: a {len(shape)}-dimension shape overflows 64 bits",
            )
        if bits % 8 or bits // 8 != end - begin:
            raise Malformed(
                "safetensors.size-mismatch",
                f"tensor {label!r}: {dtype}{_short(str(shape))} needs {bits / 8:g} bytes, "
                f"offsets give {end - begin}",
            )
        spans.append((begin, end, label))
    spans.sort()
    cursor = 0
    for begin, end, label in spans:
        if begin < cursor:
            raise Malformed(
                "safetensors.overlapping-offsets", f"tensor {label!r} overlaps the previous one"
            )
        if begin > cursor:
            raise Malformed(
                "safetensors.offsets-gap", f"unused bytes {cursor}..{begin} before {label!r}"
            )
        cursor = end
    if cursor != data_len:
        raise Malformed(
            "safetensors.trailing-data",
            f"data section has {data_len - cursor} bytes no tensor accounts for",
        )


def numel(shape: Iterable[int]) -> int | None:
    """Element count folded left, ``None`` at the first step past 64 bits.

    Like the library's ``checked_mul`` fold: ``[0, 2**62, 2**62]`` is 0 but
    ``[2**62, 2**62, 0]`` overflows.  Sizes are checked before multiplying, so
    every product stays below 2**128: no step is slower than the last.
    """
    n = 1
    for d in shape:
        if d > USIZE_MAX:
            return None
        n *= d
        if n > USIZE_MAX:
            return None
    return n


def _uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
