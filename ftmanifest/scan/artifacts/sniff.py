"""Tell a file's format from its bytes, never from its name.

Layer: judging rooms - edge helper of the scanner (reads the first bytes of a file, and
a zip's directory).  A pickle named ``.safetensors`` is a pickle; a torch archive named
``.bin`` is a torch archive.  Formats: ``safetensors``, ``pickle``, ``torch-zip`` (a zip
holding ``*/data.pkl`` or any other ``*.pkl`` member), ``torch-legacy`` (the pre-1.6
``torch.save`` stream: a magic-number pickle then more pickles), ``npy``, ``npz``,
``zip``, ``gzip``, ``parquet``, ``text``, ``binary``, ``empty``.

Pickles have no magic: a file is a pickle when CPython's unpickler would act
on it - import or call something, or reach STOP - or still accepts its first
``SNIFF_BYTES`` (``pickle_sequence.sniff_pickle``).  Text and binary are only
what the unpickler refuses before doing anything.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import IO

from ftmanifest.held import open_binary
from ftmanifest.scan.artifacts.images import image_kind
from ftmanifest.scan.artifacts.onnx_model import looks_like_onnx
from ftmanifest.scan.artifacts.pickle_sequence import TORCH_MAGIC, sniff_pickle
from ftmanifest.scan.artifacts.tfrecord import is_tfrecord_name
from ftmanifest.scan.text.encodings import detect

__all__ = ["HEAD", "TORCH_MAGIC", "detect_format"]

HEAD = 8192
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
# Model formats this version recognises but does not judge, and what they can hold:
# each is a not-scanned error of its own rule (``scan.not-judged``), never text.
NOT_JUDGED = {
    "tflite": "a TFLite model, which can name custom operators (native code)",
    "msgpack": "a msgpack (Flax) state, read by no judge here",
    "7z": "a 7z archive, which is not opened",
}


def not_judged_kind(path: Path, head: bytes) -> str | None:
    """A model format known by magic or name: one of ``NOT_JUDGED``, or a TensorFlow graph."""
    if head[4:8] == b"TFL3":
        return "tflite"
    if head.startswith(b"7z\xbc\xaf\x27\x1c"):
        return "7z"
    suffix = path.suffix.lower()
    if path.name == "saved_model.pb" or suffix == ".pb":
        return "tf-graph"  # judged (``tf_graph``); named here, before the ONNX sniff
    if suffix == ".msgpack":
        return "msgpack"
    return None


_TEXT_CONTROLS = frozenset(b"\t\n\r\f\v\x1b")


def detect_format(path: Path) -> str:
    """The format of ``path`` from its content; see the module docstring."""
    with open_binary(path) as fh:
        return format_of(fh, path)


def format_of(fh: IO[bytes], path: Path) -> str:
    """``detect_format`` of what ``fh`` reads from its start (``path`` for its name)."""
    head = fh.read(HEAD)
    if not head:
        return "empty"
    if _is_safetensors(head):
        # an 8-byte length can spell opcodes: a real header never imports
        return sniff_pickle(_at(fh, 0), acting_only=True) or "safetensors"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip_kind(fh)
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"GGUF"):
        return "gguf"
    if (image := image_kind(head)) is not None:
        return image
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if is_tfrecord_name(path.name):
        return "tfrecord"  # no magic: TensorBoard's events and TFRecord data by name
    if _hdf5_superblock(fh, head):
        return "hdf5"  # judged (``hdf5_model``), in a child process
    if path.suffix.lower() == ".onnx":
        return "onnx"
    if (unjudged := not_judged_kind(path, head)) is not None:
        return unjudged  # before the ONNX sniff: a TensorFlow graph is protobuf too
    if looks_like_onnx(head):
        return "onnx"  # protobuf: its strings can make a tiny model read as text
    kind = sniff_pickle(_at(fh, 0))
    if kind:
        return kind
    return "text" if _is_text(head) else "binary"


def _hdf5_superblock(fh: IO[bytes], head: bytes) -> bool:
    """libhdf5 looks for its signature at 0, 512, 1024, 2048 ... (a user block before it)."""
    offset = 0
    while True:
        if offset + len(HDF5_MAGIC) <= len(head):
            sig = head[offset : offset + len(HDF5_MAGIC)]
        else:
            fh.seek(offset)
            sig = fh.read(len(HDF5_MAGIC))
            if len(sig) < len(HDF5_MAGIC):
                return False
        if sig == HDF5_MAGIC:
            return True
        offset = 512 if offset == 0 else offset * 2


def _at(fh: IO[bytes], offset: int) -> IO[bytes]:
    fh.seek(offset)
    return fh


def _is_safetensors(head: bytes) -> bool:
    """8-byte little-endian length, then a JSON object.

    The length may be absurd (that is a finding for the header check), but its
    top three bytes must be zero - text never looks like that.
    """
    if len(head) < 10 or head[8:9] != b"{":
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return n >= 2 and head[5:8] == b"\0\0\0"


def _zip_kind(fh: IO[bytes]) -> str:
    try:
        with zipfile.ZipFile(fh) as zf:  # leaves fh open: the caller's
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, LookupError):
        return "zip"  # judged by the zip scanner, which reports what it cannot read
    if any(n.endswith(".pkl") for n in names):
        return "torch-zip"
    if names and all(n.endswith(".npy") for n in names):
        return "npz"
    return "zip"


def _is_text(head: bytes) -> bool:
    if detect(head) is not None:
        return True  # UTF-16/32 with a byte-order mark, or UTF-16 by its NUL pattern
    if b"\0" in head:
        return False
    controls = sum(1 for b in head if b < 0x20 and b not in _TEXT_CONTROLS)
    return controls * 20 < len(head)
