"""Random gadget pickles are always flagged; the sniffer agrees with CPython.

Gadgets are assembled opcode by opcode: the import spelled with GLOBAL or
STACK_GLOBAL, its strings from any string opcode or the memo, protocols 0-5,
with or without FRAME, wrapped in containers and BUILDs.  A restricted
``pickle.Unpickler`` whose ``find_class`` records the import and hands back a
harmless class proves CPython's unpickler resolves it; then the real scan entry
point, on a file with a misleading suffix, must report an error.
"""

from __future__ import annotations

import io
import pickle
import struct
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.scan.artifacts.sniff import detect_format
from ftmanifest.scan.engine import ScanOptions, scan_paths

TARGETS = [
    ("os", "system"),
    ("posix", "system"),
    ("subprocess", "Popen"),
    ("builtins", "eval"),
    ("builtins", "exec"),
    ("importlib", "import_module"),
]
_ident = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)


class _Seen(Exception):
    pass


class Recorder(pickle.Unpickler):
    """Never imports: every global becomes a fresh, harmless class."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.imports: list[str] = []

    def find_class(self, module: str, name: str) -> Any:
        self.imports.append(f"{module}.{name}")
        return type("Harmless", (), {"__init__": lambda self, *a, **k: None})

    def persistent_load(self, pid: Any) -> Any:
        return pid


def _str_op(value: str, how: str) -> bytes:
    raw = value.encode()
    if how == "short":
        return b"\x8c" + bytes([len(raw)]) + raw
    if how == "bin":
        return b"X" + struct.pack("<I", len(raw)) + raw
    return b"V" + raw + b"\n"


class _Memo:
    """Hands out memo slots and the opcodes that fill and read them."""

    def __init__(self) -> None:
        self.next = 0

    def put(self, how: str) -> tuple[bytes, int]:
        idx, self.next = self.next, self.next + 1
        if how == "memoize":
            return b"\x94", idx
        if how == "binput":
            return b"q" + bytes([idx]), idx
        return b"p" + str(idx).encode() + b"\n", idx

    @staticmethod
    def get(idx: int, how: str) -> bytes:
        if how == "binget":
            return b"h" + bytes([idx])
        if how == "long_binget":
            return b"j" + struct.pack("<I", idx)
        return b"g" + str(idx).encode() + b"\n"


@st.composite
def gadgets(draw: st.DrawFn) -> tuple[bytes, str]:
    module, name = draw(st.sampled_from(TARGETS) | st.tuples(_ident, _ident))
    memo = _Memo()
    proto = draw(st.integers(0, 5))
    body = b""
    if draw(st.booleans()):  # noise before the import, in the memo
        op, _ = memo.put(draw(st.sampled_from(["memoize", "binput", "put"])))
        body += b"}" + op + b"0"
    spelling = draw(st.sampled_from(["global", "stack", "stack-memo"]))
    if spelling == "global":
        body += b"c" + module.encode() + b"\n" + name.encode() + b"\n"
    else:
        for part in (module, name):
            body += _str_op(part, draw(st.sampled_from(["short", "bin", "unicode"])))
            if spelling == "stack-memo":
                op, idx = memo.put(draw(st.sampled_from(["memoize", "binput", "put"])))
                how = draw(st.sampled_from(["binget", "long_binget", "get"]))
                body += op + b"0" + memo.get(idx, how)
        body += b"\x93"
    call = draw(st.sampled_from(["reduce", "newobj", "build"]))
    arg = _str_op("id", "unicode")
    if call == "reduce":
        body += b"(" + arg + b"tR"
    elif call == "newobj":
        body += b"(" + arg + b"t\x81"
    else:
        body += b"}" + arg + b"Nsb"  # BUILD {'id': None} on the imported class
    for wrap in draw(st.lists(st.sampled_from(["list", "dict", "tuple", "build"]), max_size=3)):
        if wrap == "list":
            body = b"](" + body + b"e"
        elif wrap == "dict":
            body = b"}(" + _str_op("k", "short") + body + b"u"
        elif wrap == "tuple":
            body = b"(" + body + b"t"
        else:
            key = _str_op("k", "short")
            body = b"ccollections\nOrderedDict\n)R}" + key + body + b"sb"
    body += b"."
    head = b"\x80" + bytes([proto]) if proto >= 2 or draw(st.booleans()) else b""
    if proto >= 4 and draw(st.booleans()):
        body = b"\x95" + struct.pack("<Q", len(body)) + body
    return head + body, f"{module}.{name}"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gadget=gadgets(), suffix=st.sampled_from([".pkl", ".txt", ".json", ".bin"]))
def test_every_gadget_is_flagged(gadget: tuple[bytes, str], suffix: str) -> None:
    data, dotted = gadget
    loader = Recorder(data)
    try:
        loader.load()
    except Exception:  # noqa: BLE001 - BUILD on a class may fail, after the import
        assert data.endswith(b"b.") or b"Nsb" in data
    assert dotted in loader.imports  # CPython's unpickler resolved the import
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"model{suffix}"
        path.write_bytes(data)
        assert detect_format(path) == "pickle"
        found = scan_paths([path], ScanOptions(jobs=1)).findings
        errors = {f.extra.get("import") for f in found if f.rule == "pickle.unsafe-import"}
        assert dotted in errors, found
        assert all(f.severity == "error" for f in found if f.kind == "unsafe-pickle")


# -- the sniffer never calls text what CPython's unpickler acts on ---------------------
# Opcodes and line bytes only: no 4/8-byte lengths or memo indexes, whose huge values
# would make the C unpickler allocate (or zero) gigabytes before it fails.
_ALPHABET = list(b"(.012FIKLNSUVabcd}eghilo]st)u\x80\x85\x86\x87\x88\x89\x8c\x8f\x90\x91\x93\x94")
_FILLER = list(b"0123456789 \n'\"xosyemL_.-+abc")


@settings(max_examples=400, deadline=None)
@given(
    data=st.lists(
        st.sampled_from(_ALPHABET) | st.sampled_from(_FILLER), min_size=1, max_size=40
    ).map(bytes)
)
def test_sniffer_agrees_with_cpython(data: bytes) -> None:
    loader = Recorder(data)
    try:
        loader.load()
        acted = True
    except Exception:  # noqa: BLE001 - any refusal of the real unpickler
        acted = False
    # a module name that is not a dotted identifier only imports a file an attacker planted
    acted = acted or any(
        all(p.isidentifier() for p in imp.rsplit(".", 1)[0].split(".")) for imp in loader.imports
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.txt"
        path.write_bytes(data)
        if acted:
            assert detect_format(path) in ("pickle", "torch-legacy")
