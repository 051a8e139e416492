"""Tell a file's format from its bytes, never from its name.

Layer: edge helper of the scanner (reads the first bytes of a file, and a zip's
directory).  A pickle named ``.safetensors`` is a pickle; a torch archive named
``.bin`` is a torch archive.  Formats: ``safetensors``, ``pickle``,
``torch-zip`` (a zip holding ``*/data.pkl`` or any other ``*.pkl`` member),
``torch-legacy`` (the pre-1.6 ``torch.save`` stream: a magic-number pickle then
more pickles), ``npy``, ``npz``, ``zip``, ``gzip``, ``parquet``, ``text``,
``binary``, ``empty``.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from pathlib import Path

from ftmanifest.scan.pickles import PickleWalker

HEAD = 8192
PROTO0_PROBE = 1 << 20  # a protocol-0/1 pickle must reach STOP (or stay valid) this far
# torch/serialization.py MAGIC_NUMBER, as pickled by protocols 2+ (LONG1) and 0/1 (LONG)
TORCH_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY = re.compile(
    rb"\A(?:\x80[\x02-\x05](?:\x95.{8})?\x8a\x0a"
    + re.escape(TORCH_MAGIC.to_bytes(10, "little"))
    + rb"|"
    + rb"L"
    + str(TORCH_MAGIC).encode()
    + rb"L?\n)\.",
    re.DOTALL,
)
_PROTO0_START = frozenset(b"(}]).cIJKLSTUVXNFdlgjhp\x88\x89\x8c")
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\v\x1b")


def detect_format(path: Path) -> str:
    """The format of ``path`` from its content; see the module docstring."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD)
    if not head:
        return "empty"
    if _is_safetensors(head):
        return "safetensors"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip_kind(path)
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"PAR1"):
        return "parquet"
    if _LEGACY.match(head):
        return "torch-legacy"
    if head[0] == 0x80 and len(head) > 1 and 2 <= head[1] <= 5:
        return "pickle"
    if head[0] in _PROTO0_START and _looks_like_old_pickle(path):
        return "pickle"
    return "text" if _is_text(head) else "binary"


def _is_safetensors(head: bytes) -> bool:
    """8-byte little-endian length, then a JSON object.

    The length may be absurd (that is a finding for the header check), but its
    top three bytes must be zero - text never looks like that.
    """
    if len(head) < 10 or head[8:9] != b"{":
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return n >= 2 and head[5:8] == b"\0\0\0"


def _zip_kind(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return "zip"
    if any(n.endswith(".pkl") for n in names):
        return "torch-zip"
    if names and all(n.endswith(".npy") for n in names):
        return "npz"
    return "zip"


def _looks_like_old_pickle(path: Path) -> bool:
    """A protocol 0/1 pickle parses from the first byte to STOP (or past the probe).

    Text almost never parses as pickle opcodes for more than a line or two.
    """
    with open(path, "rb") as fh:
        probe = io.BytesIO(fh.read(PROTO0_PROBE))
    res = PickleWalker(probe, max_opcodes=100_000).walk()
    if res.stopped:
        return res.opcodes >= 2 and not res.problems
    truncated_only = all(p.rule == "pickle.truncated" for p in res.problems)
    # A few opcodes then one text argument longer than the probe: a big string.
    in_text = any("text opcode" in p.message for p in res.problems)
    return truncated_only and res.end >= PROTO0_PROBE and res.opcodes >= (4 if in_text else 8)


def _is_text(head: bytes) -> bool:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True  # UTF-16 with a byte-order mark
    if b"\0" in head:
        return False
    controls = sum(1 for b in head if b < 0x20 and b not in _TEXT_CONTROLS)
    return controls * 20 < len(head)
