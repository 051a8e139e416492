"""Malicious pickles are flagged without ever being loaded (ftmanifest.scan.artifacts.pickles).

Every payload here is built with pickle.dumps (which only records __reduce__'s
answer), by hand-assembled opcodes, or by editing real torch.save archives.
Nothing in this file calls pickle.loads / torch.load on them.
"""

from __future__ import annotations

import builtins
import importlib
import io
import os
import pickle
import pickletools
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ftmanifest.findings import Finding
from ftmanifest.scan.artifacts.binary import (
    BINARY_FORMATS,
    PARSE_FAILED,
    BinaryLimits,
    scan_binary,
)
from ftmanifest.scan.artifacts.pickles import PickleWalker
from ftmanifest.scan.artifacts.sniff import TORCH_MAGIC, detect_format


class _Reduce:
    def __init__(self, func: Any, args: tuple[Any, ...]) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, ...]:
        return self.func, self.args


def _collect(text: str, *, path: str, extra: dict | None = None, **_: Any) -> list[Finding]:
    """A tiny stand-in for scan_text: one finding per string holding 'SECRET'."""
    if "SECRET" not in text:
        return []
    return [Finding(kind="secret", rule="test.secret", message="x", path=path, extra=extra or {})]


def _scan(path: Path, scanner: Any = _collect, **kw: Any) -> list[Finding]:
    return scan_binary(path, detect_format(path), scanner, **kw)


def _imports(findings: list[Finding]) -> set[str]:
    return {f.extra["import"] for f in findings if f.rule == "pickle.unsafe-import"}


PAYLOADS = {
    "os.system": _Reduce(os.system, ("echo pwned",)),
    "builtins.eval": _Reduce(eval, ("1+1",)),
    "builtins.exec": _Reduce(builtins.exec, ("import os",)),
    "subprocess.Popen": _Reduce(subprocess.Popen, (["true"],)),
}


@pytest.mark.parametrize("name", sorted(PAYLOADS))
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_reduce_payloads_flagged(tmp_path: Path, name: str, protocol: int) -> None:
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"w": PAYLOADS[name]}, protocol=protocol))
    found = _scan(path)
    aliases = {name, name.replace("builtins.", "__builtin__."), name.replace("os.", "posix.")}
    aliases.add(name.replace("subprocess.", "commands."))  # protocol < 3 spelling
    assert aliases & _imports(found)
    hit = next(f for f in found if f.rule == "pickle.unsafe-import")
    assert hit.kind == "unsafe-pickle" and hit.severity == "error"
    assert f"offset {hit.extra['offset']}" in hit.message
    ops = {pos: op.name for op, _, pos in pickletools.genops(path.read_bytes())}
    assert ops[hit.extra["offset"]] in ("GLOBAL", "STACK_GLOBAL")


def test_importlib_and_getattr(tmp_path: Path) -> None:
    inner = _Reduce(importlib.import_module, ("os",))
    evil = _Reduce(getattr, (inner, "system"))
    path = tmp_path / "x.pt"
    path.write_bytes(pickle.dumps(evil, protocol=4))
    assert {"importlib.import_module", "builtins.getattr"} <= _imports(_scan(path))


def _asm(*parts: bytes) -> bytes:
    return b"".join(parts)


def _u(s: str) -> bytes:
    raw = s.encode()
    return b"\x8c" + bytes([len(raw)]) + raw


def test_import_through_the_memo(tmp_path: Path) -> None:
    # 'os' and 'system' are memoized, popped, and fetched back for STACK_GLOBAL.
    data = _asm(
        b"\x80\x04",
        _u("os"),
        b"\x94",  # MEMOIZE -> 0
        _u("system"),
        b"q\x05",  # BINPUT 5
        b"00",  # POP POP
        b"h\x00",  # BINGET 0
        b"j\x05\x00\x00\x00",  # LONG_BINGET 5
        b"\x93",  # STACK_GLOBAL
        _u("id"),
        b"\x85R.",  # TUPLE1 REDUCE STOP
    )
    pickletools.dis(data, out=io.StringIO())  # a well-formed pickle
    path = tmp_path / "memo.bin"
    path.write_bytes(data)
    found = _scan(path)
    assert _imports(found) == {"os.system"}
    assert found[0].extra["opcode"] == "STACK_GLOBAL"


def test_protocol0_memo_get(tmp_path: Path) -> None:
    data = b"Vposix\np0\n0Vsystem\np1\n0g0\ng1\n\x93(Vid\ntR."
    path = tmp_path / "p0.pkl"
    path.write_bytes(data)
    assert _imports(scan_binary(path, "pickle", None)) == {"posix.system"}


def test_unresolvable_stack_global(tmp_path: Path) -> None:
    # module name comes from a call result, not a constant
    data = _asm(b"\x80\x04", b"c_codecs\nencode\n", _u("os"), b"\x85R", _u("system"), b"\x93.")
    path = tmp_path / "u.pkl"
    path.write_bytes(data)
    rules = {f.rule for f in scan_binary(path, "pickle", None)}
    assert "pickle.unresolvable-import" in rules


def test_ext_opcode_and_build_on_global(tmp_path: Path) -> None:
    path = tmp_path / "e.pkl"
    path.write_bytes(b"\x80\x02\x82\x01.")
    assert {f.rule for f in scan_binary(path, "pickle", None)} == {"pickle.extension-import"}
    path.write_bytes(b"\x80\x02ctorch\nTensor\n}(U\x03fooK\x01ub.")
    assert "pickle.build-on-global" in {f.rule for f in scan_binary(path, "pickle", None)}


def test_raw_pickle_named_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(pickle.dumps(PAYLOADS["os.system"], protocol=2))
    found = _scan(path)
    assert {"pickle.disguised", "pickle.unsafe-import"} <= {f.rule for f in found}


def _torch_zip(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    torch.save({"w": torch.ones(3)}, path)
    return path


def _rewrite(src: Path, dst: Path, replace: dict[str, bytes], add: dict[str, bytes]) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, replace.get(info.filename, zin.read(info)))
        for name, data in add.items():
            zout.writestr(name, data)


def test_payload_inside_torch_zip_named_bin(tmp_path: Path) -> None:
    src = _torch_zip(tmp_path, "clean.pt")
    assert not [f for f in _scan(src) if f.severity == "error"]
    member = next(n for n in zipfile.ZipFile(src).namelist() if n.endswith("data.pkl"))
    dst = tmp_path / "pytorch_model.bin"
    _rewrite(src, dst, {member: pickle.dumps(PAYLOADS["os.system"], protocol=2)}, {})
    found = _scan(dst)
    hit = next(f for f in found if f.rule == "pickle.unsafe-import")
    assert hit.extra["member"] == member and hit.extra["import"] in ("os.system", "posix.system")


def test_zip_with_several_data_pkl(tmp_path: Path) -> None:
    src = _torch_zip(tmp_path, "clean.pt")
    dst = tmp_path / "two.pt"
    evil = pickle.dumps(PAYLOADS["builtins.eval"], protocol=2)
    _rewrite(src, dst, {}, {"zzz/data.pkl": evil, "clean/extra.pkl": evil})
    found = _scan(dst)
    rules = {f.rule for f in found}
    assert {"torch.multiple-data-pkl", "pickle.unsafe-import"} <= rules
    members = {f.extra["member"] for f in found if f.rule == "pickle.unsafe-import"}
    assert members == {"zzz/data.pkl", "clean/extra.pkl"}


def test_legacy_stream_with_payload(tmp_path: Path) -> None:
    parts = [TORCH_MAGIC, 1001, {"protocol_version": 1001}, PAYLOADS["os.system"], []]
    path = tmp_path / "old.pt"
    path.write_bytes(b"".join(pickle.dumps(p, protocol=2) for p in parts) + b"\0" * 64)
    assert detect_format(path) == "torch-legacy"
    assert _imports(_scan(path)) & {"os.system", "posix.system"}


def test_object_npy_with_nested_payload(tmp_path: Path) -> None:
    path = tmp_path / "arr.npy"
    np.save(path, np.array([1, PAYLOADS["subprocess.Popen"]], dtype=object), allow_pickle=True)
    assert "subprocess.Popen" in _imports(_scan(path))
    np.save(tmp_path / "ok.npy", np.array([{"a": 1}, "x"], dtype=object), allow_pickle=True)
    assert _scan(tmp_path / "ok.npy") == []
    npz = tmp_path / "bundle.npz"
    np.savez(npz, good=np.arange(3), bad=np.array([PAYLOADS["builtins.exec"]], dtype=object))
    hit = [f for f in _scan(npz) if f.rule == "pickle.unsafe-import"]
    assert hit and hit[0].extra["member"] == "bad.npy"


def test_strings_go_to_the_text_scanner_with_offsets(tmp_path: Path) -> None:
    big = "x" * (1 << 21) + " SECRET tail"
    obj = {"token": "my SECRET value", "plain": "nothing here", "big": big}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        path = tmp_path / f"s{protocol}.pkl"
        path.write_bytes(pickle.dumps(obj, protocol=protocol))
        found = [f for f in scan_binary(path, "pickle", _collect) if f.kind == "secret"]
        assert len(found) >= 2, protocol
        ops = {pos: op.name for op, _, pos in pickletools.genops(path.read_bytes())}
        assert all(
            ops[f.extra["offset"]] in ("UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8")
            for f in found
        )


def test_caps_make_not_scanned(tmp_path: Path) -> None:
    path = tmp_path / "big.pkl"
    path.write_bytes(pickle.dumps(list(range(5000)), protocol=2))
    found = scan_binary(path, "pickle", None, limits=BinaryLimits(max_opcodes=100))
    assert [f.kind for f in found] == ["not-scanned"]
    found = scan_binary(path, "pickle", None, limits=BinaryLimits(max_pickle_bytes=1000))
    assert [f.kind for f in found] == ["not-scanned"]


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (pickle.dumps({"a": "b" * 50}, protocol=2)[:-10], "pickle.truncated"),
        (b"\x80\x02\xff.", "pickle.invalid-opcode"),
        (b"\x80\x09N.", "pickle.bad-protocol"),
    ],
)
def test_broken_pickles_are_malformed(tmp_path: Path, data: bytes, rule: str) -> None:
    path = tmp_path / "b.pkl"
    path.write_bytes(data)
    found = scan_binary(path, "pickle", None)
    assert [(f.kind, f.rule) for f in found] == [("malformed", rule)]


def test_walker_never_imports(tmp_path: Path) -> None:
    data = b"cnot_a_real_module_xyz\nboom\n)R."
    res = PickleWalker(io.BytesIO(data)).walk()
    assert [i.dotted for i in res.imports] == ["not_a_real_module_xyz.boom"]
    import sys

    assert "not_a_real_module_xyz" not in sys.modules


def _seed_files() -> dict[str, bytes]:
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2), "b": torch.zeros(1, dtype=torch.bfloat16)}, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        data_pkl = zf.read(next(n for n in zf.namelist() if n.endswith("data.pkl")))
    from safetensors.torch import save as st_save

    npy = io.BytesIO()
    np.save(npy, np.array([{"a": 1}, "x"], dtype=object), allow_pickle=True)

    return {
        "pickle": data_pkl,
        "torch-zip": buf.getvalue(),
        "safetensors": st_save({"w": torch.ones(2)}, metadata={"k": "v"}),
        "npy": npy.getvalue(),
    }


SEEDS = _seed_files()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(SEEDS)),
    fmt=st.sampled_from(sorted(BINARY_FORMATS)),
    edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=8),
    cut=st.one_of(st.none(), st.integers(0, 1 << 16)),
)
# A zip member whose name was zeroed away: ZipInfo.is_dir() raised IndexError.
@example(kind="torch-zip", fmt="binary", edits=[(65535, 0)], cut=None)
# The zip64 end record's directory offset raised: member offsets below a C long's range.
@example(kind="torch-zip", fmt="binary", edits=[(7273, 129)], cut=None)
def test_fuzz_mutated_real_files_never_raise(
    kind: str, fmt: str, edits: list[tuple[int, int]], cut: int | None
) -> None:
    data = bytearray(SEEDS[kind])
    for pos, byte in edits:
        data[pos % len(data)] = byte
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    _fuzz_one(bytes(data), fmt)


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=600), fmt=st.sampled_from(sorted(BINARY_FORMATS)))
def test_fuzz_arbitrary_bytes_never_raise(data: bytes, fmt: str) -> None:
    _fuzz_one(data, fmt)


def _fuzz_one(data: bytes, fmt: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.bin"
        path.write_bytes(data)
        detected = detect_format(path)
        for f in (fmt, detected):
            if f in BINARY_FORMATS:
                found = scan_binary(path, f, _collect)
                assert all(isinstance(x, Finding) for x in found)
                # the safety net in scan_binary is not where errors should end up
                assert not [x for x in found if x.rule == PARSE_FAILED], found


def test_a_zip_inside_a_stream_whose_member_name_is_not_utf8_is_unreadable(tmp_path: Path) -> None:
    """Found by the fuzz test above: a zip flagged UTF-8 whose name is not UTF-8
    made zipfile raise UnicodeDecodeError, which reached scan_binary's safety
    net; it is an unreadable-archive row naming why."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("aé.txt", b"x")  # a non-ASCII name: the UTF-8 flag is set
    data = bytearray(buf.getvalue())
    name = "aé".encode()
    central = data.rindex(name)  # the central directory's copy is what zipfile reads
    data[central : central + 1] = b"\x80"
    path = tmp_path / "logs.bin"
    path.write_bytes(bytes(data))
    found = scan_binary(path, "binary", _collect)
    rules = {f.rule for f in found}
    assert PARSE_FAILED not in rules, found
    assert "scan.unreadable" in rules and any("UnicodeDecodeError" in f.message for f in found)
