"""The tar stream of a backup archive, header by header: what ``members`` judges.

Layer: judging rooms - edge (parses tar itself from a descriptor; never ``tarfile``,
never ``extractall``).  This module knows tar and nothing of backups: it turns the
bytes age decrypts into ``TarMember`` headers and lends a member's bytes to whoever
copies them; which members may appear, in what order and with what digests is
``members``' judgement against the signed index.

The reader goes forward only and accepts the POSIX ustar and pax headers that
``backup create`` and GNU ``tar --format=pax`` write: each header block must
carry the POSIX magic and a valid checksum; one pax extended header (type
``x``) may precede a member, and of its records only ``path`` and ``size``
change anything (a ``GNU.sparse`` record makes the member a sparse file,
refused; modes, times and owners are taken from the signed index, never from
the tar).  Every other type -- links, devices, FIFOs, GNU long names and sparse
files, global headers, contiguous files -- is refused by name.  A member's
bytes are read from the pipe straight into the buffer the sink lends
(``claim``), up to 1 MiB a read, with no allocation and no copy on the way:
Python's ``tarfile`` in stream mode spent as long again joining buffers, and a
fresh 1 MiB ``bytes`` a read cost page faults and a copy into restore's
aligned blocks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import IO

from ftmanifest.backup.pipe import PIPE_BYTES

BLOCK = 512
MEMBER_READ = PIPE_BYTES  # a member's bytes, at most this much a read
PAX_MAX = 1 << 20  # the largest pax extended header accepted
_MAGIC = b"ustar\x0000"  # POSIX ustar and pax; GNU's old "ustar  \0" is refused

_TYPE_WORDS = {
    b"1": "a hard link",
    b"2": "a symbolic link",
    b"3": "a character device",
    b"4": "a block device",
    b"6": "a FIFO",
    b"7": "a contiguous file",
    b"S": "a GNU sparse file",
    b"L": "a GNU long name",
    b"K": "a GNU long link name",
    b"g": "a pax global header",
    b"x": "a second pax extended header",
}


class Discard:
    """Where a member's bytes go when nothing is written (``backup check
    --read-data``): one reused buffer.  A sink's file has the same three
    calls: ``claim(n)`` lends a writable buffer of at most ``n`` bytes that
    the stream reads into, ``commit(n)`` takes its first ``n`` bytes, and
    ``close()`` ends the file."""

    def __init__(self) -> None:
        self.view = memoryview(bytearray(MEMBER_READ))

    def claim(self, n: int) -> memoryview:
        return self.view[:n]

    def commit(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


class Truncated(Exception):
    """The tar stream ended early: a consequence of a failed decryption."""


@dataclass(frozen=True)
class TarMember:
    name: str
    kind: bytes  # b"0" a file, b"5" a folder, else a type refused by name
    size: int
    sparse: bool


class TarStream:
    """The tar stream, forward only, from a descriptor: headers through a
    read-ahead buffer, a member's bytes straight from ``os.read``."""

    def __init__(self, source: IO[bytes]) -> None:
        self.fd = source.fileno()
        self.buf = b""
        self.at = 0
        self.offset = 0  # bytes of the stream consumed so far
        self.discard = Discard()

    def some(self, n: int) -> bytes:
        """Up to ``n`` bytes, at least one unless the stream ended."""
        if self.at < len(self.buf):
            data = self.buf[self.at : self.at + n]
            self.at += len(data)
        else:
            data = os.read(self.fd, min(n, MEMBER_READ))
        self.offset += len(data)
        return data

    def readinto(self, view: memoryview) -> int:
        """Read up to ``len(view)`` bytes into ``view`` (0 at the end): the
        read-ahead buffer first, then straight from the descriptor, with no
        allocation and no copy on the way to the sink's buffer."""
        if self.at < len(self.buf):
            n = min(len(view), len(self.buf) - self.at)
            view[:n] = self.buf[self.at : self.at + n]
            self.at += n
        else:
            n = os.readv(self.fd, [view])
        self.offset += n
        return n

    def exactly(self, n: int) -> bytes:
        """``n`` bytes, or ``Truncated``."""
        if len(self.buf) - self.at < n:
            parts, got = [self.buf[self.at :]], len(self.buf) - self.at
            while got < n:
                more = os.read(self.fd, max(MEMBER_READ, n - got))
                if not more:
                    raise Truncated()
                parts.append(more)
                got += len(more)
            self.buf, self.at = b"".join(parts), 0
        data = self.buf[self.at : self.at + n]
        self.at += n
        self.offset += n
        return data

    def skip_padding(self, size: int) -> None:
        if pad := -size % BLOCK:
            if self.exactly(pad).count(0) != pad:
                raise Malformed("nonzero padding after a member")

    def all_zero_to_end(self) -> bool:
        while data := self.some(MEMBER_READ):
            if data.count(0) != len(data):
                return False
        return True


class Malformed(Exception):
    """A header this reader does not accept; the text says which part."""


def _number(field: bytes, what: str) -> int:
    if field[:1] in (b"\x80", b"\xff"):  # base-256, for values an octal field cannot hold
        if field[:1] == b"\xff":
            raise Malformed(f"negative {what}")
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise Malformed(f"{what} is not an octal number") from None


def _text(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _checksum_ok(block: bytes) -> bool:
    stored = _number(block[148:156], "checksum")
    unsigned = sum(block) - sum(block[148:156]) + 8 * 32
    if stored == unsigned:
        return True
    high = sum(1 for b in block[:148] if b > 127) + sum(1 for b in block[156:] if b > 127)
    return stored == unsigned - 256 * high  # as some old tars summed signed chars


def _pax(data: bytes) -> dict[str, bytes]:
    """The records of a pax extended header: ``"%d %s=%s\\n"`` each."""
    records: dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        if data[pos:].count(0) == len(data) - pos:
            break  # zero fill to the block
        space = data.find(b" ", pos)
        if space < 0 or not data[pos:space].isdigit():
            raise Malformed("a pax record without its length")
        end = pos + int(data[pos:space])
        if end <= space or end > len(data) or data[end - 1 : end] != b"\n":
            raise Malformed("a pax record of the wrong length")
        key, eq, value = data[space + 1 : end - 1].partition(b"=")
        if not eq:
            raise Malformed("a pax record without '='")
        records[key.decode("utf-8", "surrogateescape")] = value
        pos = end
    return records


def read_header(stream: TarStream) -> TarMember | None:
    """The next member's header (following one pax header), or None at the end."""
    block = stream.exactly(BLOCK)
    if block.count(0) == BLOCK:
        stream.offset -= BLOCK  # the end: the zero blocks are judged as padding
        stream.at -= BLOCK
        return None
    records: dict[str, bytes] = {}
    block = _checked(block)
    if block[156:157] == b"x":
        size = _number(block[124:136], "size")
        if size > PAX_MAX:
            raise Malformed(f"a pax header of {size} bytes")
        records = _pax(stream.exactly(size))
        stream.skip_padding(size)
        block = _checked(stream.exactly(BLOCK))
    kind = block[156:157]
    name = _text(block[0:100])
    if prefix := _text(block[345:500]):
        name = prefix + "/" + name
    size = _number(block[124:136], "size")
    if "path" in records:
        name = records["path"].decode("utf-8", "surrogateescape")
    if "size" in records:
        if not records["size"].isdigit():
            raise Malformed("a pax size that is not a number")
        size = int(records["size"])
    if kind in (b"0", b"\0") and name.endswith("/"):
        kind = b"5"  # the old way to write a folder
    if kind == b"\0":
        kind = b"0"
    if kind == b"5":
        name = name.rstrip("/")
        if size:
            raise Malformed(f"a folder with {size} bytes of data")
    sparse = any(k.startswith("GNU.sparse.") for k in records)
    return TarMember(name, kind, size, sparse)


def _checked(block: bytes) -> bytes:
    if len(block) != BLOCK or block[257:265] != _MAGIC:
        raise Malformed("a header block without the POSIX ustar magic")
    if not _checksum_ok(block):
        raise Malformed("a header block whose checksum does not match")
    return block


def kind_words(member: TarMember) -> str:
    if member.sparse:
        return "a sparse file"
    words = {b"0": "a regular file", b"5": "a folder", b"x": "a pax extended header"}
    return words.get(member.kind) or _TYPE_WORDS.get(member.kind, f"type {member.kind!r}")
