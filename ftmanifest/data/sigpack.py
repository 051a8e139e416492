"""Record signatures as bytes of one fixed layout, for ``data check --distributed``.

Layer: judging rooms - data (pure: bytes in, checked values out; numpy and rensa
imported inside functions).  What a rank hands the others at each gather of
``ranks.RankSigner`` is parsed here, never unpickled, and every field is checked; a
payload that does not fit raises ``wire.Malformed`` and the caller refuses naming the
rank.  One payload, little-endian:

  header   7 bytes ``FTMSIG`` + version 2 (120 MinHash values), 1 byte kind
  ROUND    u8 ended (0/1), u32 chunks; then ``chunks`` x (u64 chunk index,
           u32 records); then every record of those chunks in order:
           u64 number, u64 line, u8 has text (0/1), 16 bytes text hash,
           ``NUM_PERM`` x u32 MinHash values (all zero without text)
  ERROR    UTF-8 JSON: the error's fields (``wire.error_to_wire``)
  FINAL    UTF-8 JSON: {"code": exit code or null, "error": fields or null}

A MinHash crosses as its ``NUM_PERM`` values: rensa has no constructor from
values, so the receiver writes rensa's own state (the header of a fresh
``RMinHash``, then the values as 5-byte LEB128 varints) from values it has
checked, and ``__setstate__`` reads it; ``pack_round`` takes the values
from ``digest()``.  ``_prefix`` checks once that this rensa reads that
layout back and stops with an internal error if not.  Rank 0 keeps its own
signatures and sends only its chunk table (record counts 0).
"""

from __future__ import annotations

import array
import itertools
import json
import struct
from functools import lru_cache
from typing import Any

from ftmanifest import wire
from ftmanifest.data.text import NUM_PERM, SEED
from ftmanifest.errors import UnsupportedDependencyError
from ftmanifest.wire import Malformed

MAGIC = b"FTMSIG\x02"  # version 1 carried 128 MinHash values
ROUND, ERROR, FINAL = 1, 2, 3
_HEAD = struct.Struct("<7sB")
_ROUND = struct.Struct("<BI")
_MAX_INT = 1 << 53  # record numbers and lines: exact in a float, as JSON reports them
_EMPTY = b"\xff\xff\xff\xff\x0f" * NUM_PERM  # a fresh RMinHash: every value 2**32 - 1


def _dtypes() -> tuple[Any, Any]:
    import numpy as np

    chunk = np.dtype([("index", "<u8"), ("count", "<u4")])
    record = np.dtype(
        [
            ("number", "<u8"),
            ("line", "<u8"),
            ("text", "u1"),
            ("hash", "u1", (16,)),
            ("minhash", "<u4", (NUM_PERM,)),
        ]
    )
    return chunk, record


_SHIFTS = tuple(7 * k for k in range(5))  # a u32 as LEB128: 5 groups of 7 bits


@lru_cache(maxsize=1)
def _prefix() -> bytes:
    """rensa's state of an ``RMinHash(NUM_PERM, SEED)`` up to its values, once checked
    to read back values written as 5-byte varints."""
    import numpy as np
    from rensa import RMinHash

    fresh = RMinHash(num_perm=NUM_PERM, seed=SEED)
    state = bytes(fresh.__getstate__())
    if not state.endswith(_EMPTY):
        raise _unknown_rensa("a fresh MinHash's state does not end in its values")
    prefix = state[: -len(_EMPTY)]
    probe = np.arange(NUM_PERM, dtype=np.uint64) * np.uint64(33_554_467) % np.uint64(1 << 32)
    fresh.__setstate__(prefix + _varints(probe))
    if fresh.digest() != probe.tolist():
        raise _unknown_rensa("it reads back other values than were written")
    return prefix


def _varints(values: Any) -> bytes:
    """Each u32 of ``values`` as a 5-byte LEB128 varint (rensa reads the long form too)."""
    import numpy as np

    shifts = np.array(_SHIFTS, dtype=np.uint64)
    groups = ((values.reshape(-1, 1).astype(np.uint64) >> shifts) & np.uint64(0x7F)).astype(
        np.uint8
    )
    groups[:, :4] |= 0x80
    return groups.tobytes()


def _unknown_rensa(why: str) -> UnsupportedDependencyError:
    return UnsupportedDependencyError(
        f"this rensa stores a MinHash in a layout ftmanifest does not know ({why})",
        field="rensa",
        expected="rensa 0.5 (state: header, then LEB128 values)",
        hint="install the rensa version ftmanifest pins, or run data check without --distributed",
    )


def minhash_values(minhashes: list[Any]) -> Any:
    """The ``NUM_PERM`` values of each MinHash, as a (n, NUM_PERM) uint32 array."""
    import numpy as np

    values = array.array("I", itertools.chain.from_iterable(m.digest() for m in minhashes))
    if values.itemsize != 4 or len(values) != len(minhashes) * NUM_PERM:
        raise _unknown_rensa(f"a MinHash of other than {NUM_PERM} 32-bit values")
    return np.frombuffer(values, dtype=np.uint32).reshape(len(minhashes), NUM_PERM)


def minhashes(values: Any) -> list[Any]:
    """An ``RMinHash`` for each row of ``NUM_PERM`` uint32 values."""
    from rensa import RMinHash

    prefix = _prefix()
    data = _varints(values)
    width = 5 * NUM_PERM
    out = []
    for at in range(0, len(data), width):
        m = RMinHash(num_perm=NUM_PERM, seed=SEED)
        m.__setstate__(prefix + data[at : at + width])
        out.append(m)
    return out


def pack_round(chunks: list[tuple[int, list[Any]]], ended: bool) -> bytes:
    """This rank's signed chunks: [(chunk index, [(number, line, hash, MinHash)])]."""
    import numpy as np

    chunk_t, record_t = _dtypes()
    table = np.array([(i, len(sigs)) for i, sigs in chunks], dtype=chunk_t)
    sigs = [s for _i, part in chunks for s in part]
    records = np.zeros(len(sigs), dtype=record_t)
    if sigs:
        records["number"] = [s[0] for s in sigs]
        records["line"] = [s[1] for s in sigs]
        text = np.array([s[2] is not None for s in sigs])
        records["text"] = text
        hashes = b"".join(s[2] for s in sigs if s[2] is not None)
        records["hash"][text] = np.frombuffer(hashes, dtype=np.uint8).reshape(-1, 16)
        records["minhash"][text] = minhash_values([s[3] for s in sigs if s[2] is not None])
    head = _HEAD.pack(MAGIC, ROUND) + _ROUND.pack(int(ended), len(chunks))
    return head + table.tobytes() + records.tobytes()


def pack_error(exc: BaseException) -> bytes:
    return _HEAD.pack(MAGIC, ERROR) + json.dumps(wire.error_to_wire(exc)).encode()


def pack_final(code: int | None, error: BaseException | None) -> bytes:
    body = {"code": code, "error": None if error is None else wire.error_to_wire(error)}
    return _HEAD.pack(MAGIC, FINAL) + json.dumps(body).encode()


def unpack(raw: bytes, full: bool) -> tuple[Any, ...]:
    """("round", chunks or None, ended), ("error", exc) or ("final", code, exc or None).

    ``full``: decode the signatures ([(index, [(number, line, hash, MinHash)])]);
    otherwise only check the sizes add up.  ``Malformed`` for anything else."""
    if len(raw) < _HEAD.size:
        raise Malformed(f"{len(raw)} bytes, shorter than a header")
    magic, kind = _HEAD.unpack_from(raw)
    if magic != MAGIC:
        raise Malformed(f"a payload that starts {raw[:8]!r}")
    body = raw[_HEAD.size :]
    if kind == ROUND:
        return _round(body, full)
    if kind not in (ERROR, FINAL):
        raise Malformed(f"a payload of kind {kind}")
    try:
        value = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise Malformed("a payload whose JSON does not parse") from None
    if kind == ERROR:
        return ("error", wire.error_from_wire(value))
    if not isinstance(value, dict) or set(value) != {"code", "error"}:
        raise Malformed("a final answer that is not {code, error}")
    code = value["code"]
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise Malformed("a final answer whose code is not a number")
    if code is not None and not 0 <= code <= 255:
        raise Malformed(f"an exit code of {code}")
    error = None if value["error"] is None else wire.error_from_wire(value["error"])
    return ("final", code, error)


def _round(body: bytes, full: bool) -> tuple[Any, ...]:
    import numpy as np

    chunk_t, record_t = _dtypes()
    if len(body) < _ROUND.size:
        raise Malformed("a round shorter than its header")
    ended, count = _ROUND.unpack_from(body)
    if ended not in (0, 1):
        raise Malformed(f"a round whose 'ended' is {ended}")
    at = _ROUND.size + count * chunk_t.itemsize
    if len(body) < at:
        raise Malformed(f"a round of {count} chunks in {len(body)} bytes")
    table = np.frombuffer(body, dtype=chunk_t, count=count, offset=_ROUND.size)
    n = int(table["count"].sum(dtype=np.uint64))
    if len(body) != at + n * record_t.itemsize:
        raise Malformed(f"a round of {n} records in {len(body) - at} bytes")
    indexes = table["index"].tolist()
    if len(set(indexes)) != len(indexes):
        raise Malformed("a round that holds one chunk twice")
    if not full:
        return ("round", None, bool(ended))
    records = np.frombuffer(body, dtype=record_t, count=n, offset=at)
    text = records["text"]
    if n and (text.max() > 1 or records["number"].max() >= _MAX_INT):
        raise Malformed("a record whose text flag or number is out of range")
    if n and records["line"].max() >= _MAX_INT:
        raise Malformed("a record whose line is out of range")
    empty = text == 0
    if records["hash"][empty].any() or records["minhash"][empty].any():
        raise Malformed("a record without text that carries a hash")
    made = iter(minhashes(records["minhash"][~empty]))
    hashes = records["hash"].tobytes()
    sigs: list[tuple[int, int, bytes | None, Any]] = []
    numbers, lines, flags = records["number"].tolist(), records["line"].tolist(), text.tolist()
    for j in range(n):
        if flags[j]:
            sigs.append((numbers[j], lines[j], hashes[16 * j : 16 * j + 16], next(made)))
        else:
            sigs.append((numbers[j], lines[j], None, None))
    chunks, at = [], 0
    for index, size in zip(indexes, table["count"].tolist(), strict=True):
        chunks.append((index, sigs[at : at + size]))
        at += size
    return ("round", chunks, bool(ended))
