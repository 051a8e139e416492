"""Pickle frames: the scan walks every way CPython's unpickler reads them.

A FRAME opcode announces how many bytes the next opcodes fill.  ``pickle.loads``
ignores it.  The C unpickler over a file object *without* ``peek`` (an
``io.BytesIO``, which is how ``torch.load`` reads a zip's ``data.pkl``) reads
the frame into its buffer, and a later read that runs past the frame's end
drops what was left of the frame and reads the file after it.  One file can so
say one thing to ``pickle.loads`` and another to ``torch.load``.  A real
pickler never writes an opcode across its frame's end, so that is an error of
its own, and the walk follows both readings to name what each would import.
"""

from __future__ import annotations

import io
import pickle
import struct
import zipfile
from pathlib import Path

import pytest

from ftmanifest.scan.artifacts.binary import scan_binary
from ftmanifest.scan.engine import scan_paths

EVIL = b"\x8c\x02os\x8c\x06system\x93\x8c\x02hi\x85R"  # os.system("hi"), STACK_GLOBAL form


def _split_reading() -> bytes:
    """Flat: BINBYTES of 261 bytes that swallow the call.  Frame-dropping: 1 byte, then the call.

    FRAME(2) holds ``B`` and the first byte of BINBYTES' four-byte length.  Flat
    readers take the length from 05 01 00 00 (261); a reader that drops the
    frame's rest at the straddle takes it from 01 00 00 00 (1).
    """
    head = b"\x80\x04\x95" + struct.pack("<Q", 2) + b"B\x05" + b"\x01\x00\x00\x00"
    dropped = b"Z" + b"0" + EVIL + b"."  # the reading that drops: 1 byte, POP, the call, STOP
    flat_end = len(head) - 1 + 261  # the flat reading's payload ends here
    body = head + dropped
    body += b"-" * (flat_end - len(body))
    return body + b"0N."  # the flat reading: POP, None, STOP


class _Recorder(pickle.Unpickler):
    """The C unpickler, with imports recorded instead of made."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.imported: list[str] = []

    def find_class(self, module: str, name: str) -> object:
        self.imported.append(f"{module}.{name}")
        return lambda *a: None


def _imports(stream: io.BufferedIOBase | io.BytesIO) -> list[str]:
    rec = _Recorder(stream)
    try:
        rec.load()
    except pickle.UnpicklingError:
        pass
    return rec.imported


def test_the_two_readings_really_differ() -> None:
    data = _split_reading()
    assert pickle.loads(data) is None  # flat: nothing imported, nothing called
    assert _imports(io.BytesIO(data)) == ["os.system"]  # as torch.load reads data.pkl


def test_the_scan_names_the_import_only_the_dropping_reading_makes(tmp_path: Path) -> None:
    path = tmp_path / "weights.pkl"
    path.write_bytes(_split_reading())
    found = scan_binary(path, "pickle", None)
    rules = {f.rule for f in found if f.severity == "error"}
    assert {"pickle.unsafe-import", "pickle.frame-straddle"} <= rules, found
    (imp,) = [f for f in found if f.rule == "pickle.unsafe-import"]
    assert imp.observed == "os.system"


def test_in_a_torch_zip_torch_load_takes_the_hidden_reading(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    good = tmp_path / "good.pt"
    torch.save({"w": torch.zeros(2)}, good)
    bad = tmp_path / "pytorch_model.bin"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w", zipfile.ZIP_STORED) as out:
        for info in src.infolist():
            out.writestr(
                info, _split_reading() if info.filename.endswith("data.pkl") else src.read(info)
            )

    seen: list[str] = []

    class Seen(_Recorder):
        def find_class(self, module: str, name: str) -> object:
            seen.append(f"{module}.{name}")
            return lambda *a: None

    class Module:  # torch.load's pickle_module: the real loader, imports recorded
        Unpickler = Seen
        load = staticmethod(pickle.load)

    try:
        torch.load(bad, weights_only=False, pickle_module=Module)
    except Exception:  # noqa: BLE001 - what it builds is no state dict
        pass
    assert "os.system" in seen
    found = scan_paths([bad]).findings
    assert any(f.rule == "pickle.unsafe-import" and f.observed == "os.system" for f in found)


def test_a_file_of_no_known_name_is_still_judged_a_pickle(tmp_path: Path) -> None:
    """The format sniff follows both readings too: the dropping one acts, so it is a pickle."""
    path = tmp_path / "notes"
    path.write_bytes(_split_reading())
    found = scan_paths([path]).findings
    assert any(f.rule == "pickle.unsafe-import" for f in found), found


def test_the_literal_case_a_frame_of_two_and_binbytes_of_263(tmp_path: Path) -> None:
    """FRAME announcing 2 bytes, BINBYTES reading 263, a protocol-0 os.system call after it."""
    call = b"cos\nsystem\n(S'echo hi'\ntR."
    data = b"\x80\x04\x95" + struct.pack("<Q", 2) + b"B" + struct.pack("<I", 263) + b"x" * 263
    path = tmp_path / "f.pkl"
    path.write_bytes(data + b"0" + call)
    rules = {f.rule for f in scan_paths([path]).findings}
    assert {"pickle.unsafe-import", "pickle.frame-straddle"} <= rules


def test_frames_a_real_pickler_writes_are_not_a_finding(tmp_path: Path) -> None:
    value = {"names": [f"layer{i}" for i in range(5000)], "blob": b"\x01" * 200_000, "n": 3}
    for protocol in (4, 5):
        path = tmp_path / f"p{protocol}.pkl"
        path.write_bytes(pickle.dumps(value, protocol=protocol))
        assert b"\x95" in path.read_bytes()[:16]  # it is framed
        assert [f for f in scan_paths([path]).findings if "frame" in f.rule] == []
