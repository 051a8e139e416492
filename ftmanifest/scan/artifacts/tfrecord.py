"""TFRecord files (TensorBoard's ``events.out.tfevents.*``, ``.tfrecord`` data sets).

Layer: judging rooms - edge of the scanner (reads one file).  A TFRecord file is a run
of records, each ``length`` (u64 little-endian), a masked CRC32-C of the length (u32),
``length`` bytes of payload and a masked CRC32-C of the payload (u32).  Payloads are
protobuf (an ``Event`` with summaries and text plugins, a ``tf.train.Example``): their
bytes go to the text scanner, so a token logged as a text summary or stored in a feature
is found.  Framing that does not add up to the end of the file is
``tfrecord.unreadable`` (an error), never clean.  CRCs are not recomputed: the judgment
is of the bytes a reader would hand on.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.held import open_binary
from ftmanifest.scan.unscanned import REEXPORT_HINT, malformed

MAX_RECORD = 1 << 30
CHUNK = 1 << 20  # payload bytes scanned at a time


def is_tfrecord_name(name: str) -> bool:
    lower = name.lower()
    return ".tfevents." in lower or lower.endswith((".tfrecord", ".tfrecords"))


def scan_tfrecord(path: Path, text_scanner: Any) -> list[Finding]:
    """Findings for one TFRecord file; see the module docstring."""
    where = str(path)
    out: list[Finding] = []
    reported: set[tuple[str, str | None]] = set()
    pending: list[bytes] = []
    pending_at, size, offset, count = 0, 0, 0, 0

    def flush() -> None:
        if text_scanner is None or not pending:
            return
        text = b"\n".join(pending).decode("utf-8", "replace")
        for f in text_scanner(text, path=where, extra={"offset": pending_at}):
            if (f.rule, f.fingerprint) not in reported:
                reported.add((f.rule, f.fingerprint))
                out.append(f)

    with open_binary(path) as fh:
        while head := fh.read(12):
            if len(head) < 12:
                return out + [_broken(where, offset, "a record header is cut short")]
            (length,) = struct.unpack_from("<Q", head)
            if length > MAX_RECORD:
                return out + [_broken(where, offset, f"a record of {length} bytes")]
            payload = fh.read(length)
            crc = fh.read(4)
            if len(payload) < length or len(crc) < 4:
                return out + [_broken(where, offset, "a record is cut short")]
            if not pending:
                pending_at = offset
            pending.append(payload)
            size += length
            if size >= CHUNK:
                flush()
                pending, size = [], 0
            offset += 16 + length
            count += 1
    flush()
    return out


def _broken(where: str, offset: int, why: str) -> Finding:
    return malformed(where, "tfrecord.unreadable", f"TFRecord framing breaks at byte {offset}: "
                     f"{why}", expected="length, length CRC, payload, payload CRC up to the end",
                     hint=REEXPORT_HINT)  # fmt: skip
