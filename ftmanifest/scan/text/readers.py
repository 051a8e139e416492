"""Text readers: plain-text byte ranges and gzip streams (Parquet: ``scan.parquet``).

Layer: judging rooms - edge (reads files).  Text is streamed in bounded chunks cut at
newlines (with an overlap when a single line is longer than a chunk) and
handed whole to ``scan_buffer``; JSONL findings carry the record's line,
CSV/TSV findings the row and cell column, Parquet findings row and column.
"""

from __future__ import annotations

import csv
import gzip
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ftmanifest.findings import Finding
from ftmanifest.held import open_binary
from ftmanifest.scan.text import encodings, json_strings
from ftmanifest.scan.text.parquet import scan_parquet
from ftmanifest.scan.text.text import scan_buffer
from ftmanifest.scan.unscanned import not_scanned

__all__ = ["scan_gzip", "scan_parquet", "scan_text_open", "scan_text_range", "sniff"]

CHUNK = 4 << 20  # bytes handed to the matcher at once
OVERLAP = 16 << 10  # rescanned across every cut: longer than any match (JWT <= 12,100 bytes)
_SNIFF = 1 << 16
# UTF-16 text inside a file sniffed as UTF-8 (its first bytes were ASCII): printable
# characters each followed (LE) or preceded (BE) by a NUL, eight at least
_WIDE_RUN = re.compile(rb"(?:[\t\n\r\x20-\x7e]\x00){8,}|(?:\x00[\t\n\r\x20-\x7e]){8,}")


def looks_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a character cut at the sniff boundary
    return True


def sniff(path: Path) -> str:
    """Fallback format sniffing (``scan.sniff`` is authoritative when present)."""
    with open_binary(path) as fh:
        head = fh.read(_SNIFF)
    if not head:
        return "empty"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:4] == b"PAR1":
        return "parquet"
    return "text" if looks_text(head) else "binary"


def _align(fh: BinaryIO, pos: int, size: int) -> int:
    """First line start at or after ``pos`` (0 stays 0)."""
    if pos <= 0 or pos >= size:
        return min(max(pos, 0), size)
    fh.seek(pos - 1)
    while block := fh.read(1 << 16):
        i = block.find(b"\n")
        if i >= 0:
            return fh.tell() - len(block) + i + 1
    return size


JSON_SUFFIXES = frozenset({"json", "jsonl", "ndjson"})


def _suffix(path: Path) -> str:
    return path.name.lower().removesuffix(".gz").rsplit(".", 1)[-1]


def _annotate(findings: list[Finding], buf: bytes, base: int, path: Path) -> list[Finding]:
    """JSONL: the record's line; CSV/TSV: row and column of the cell."""
    suffix = _suffix(path)
    if suffix not in ("jsonl", "ndjson", "csv", "tsv"):
        return findings
    out = []
    for f in findings:
        info = dict(f.extra)
        if suffix in ("jsonl", "ndjson"):
            info["record"] = f.line
        else:
            start = info["span"][0] - base
            prefix = buf[buf.rfind(b"\n", 0, start) + 1 : start].decode("utf-8", "replace")
            delim = "\t" if suffix == "tsv" else ","
            info["row"], info["column"] = f.line, len(next(csv.reader([prefix], delimiter=delim)))
        out.append(f._replace(extra=info))
    return out


def _scan_stream(
    read: Callable[[int], bytes], path: Path, *, secrets: bool, pii: bool, engine: str | None,
    base_offset: int = 0, limit: int | None = None, skip_to: int = 0, skip_lines: int = 0,
    decoded: bool = False,
) -> tuple[list[Finding], int]:  # fmt: skip
    """Scan a stream in chunks; returns findings and the newlines after ``skip_to``.

    ``decoded``: the stream is wide text already decoded to UTF-8, where a NUL is
    a U+0000 of the text, not a sign of another encoding.

    Chunks are cut after a newline (inside a line longer than a chunk), and the
    next chunk starts again at least ``OVERLAP`` bytes earlier, so a match
    spanning the cut (a PEM block, a value on the line after its key, a long
    token in a huge line) is seen whole once.  Findings ending at or before
    what was already covered (``done_to``; initially ``skip_to``, where the
    previous range ends) are dropped as already reported.  Lines count from
    ``base_offset`` minus ``skip_lines`` (the lines of that leading overlap).
    """
    findings: list[Finding] = []
    seen_wide: set[tuple[str, int | None, str | None, str]] = set()  # overlaps rescan a run
    json = _suffix(path) in JSON_SUFFIXES
    newlines, offset, carry = -skip_lines, base_offset, b""
    done_to = max(skip_to, base_offset)
    while True:
        want = CHUNK if limit is None else min(CHUNK, limit - (offset - base_offset) - len(carry))
        block = read(want) if want > 0 else b""
        buf = carry + block
        if not buf:
            break
        last = not block
        cut = len(buf) if last else buf.rfind(b"\n") + 1
        if cut == 0:  # no newline in a whole chunk: cut inside the line
            cut = len(buf)
        # Restart at a line start at least OVERLAP bytes before the cut (columns
        # stay right), or inside a long line: a match that starts there, cut off
        # from its left context, is too short to reach past the cut and is dropped.
        back = max(0, cut - OVERLAP)
        line = buf.rfind(b"\n", 0, back) + 1
        nxt = cut if last else (line if cut - line <= 4 * OVERLAP else back)
        part = buf[:cut]
        # JSON: whitespace and quote escapes are blanked in place, so one
        # scan sees the words as written; strings with \uXXXX or \/ are decoded too.
        seen, changing = json_strings.neutralize(part) if json else (part, [])
        found = scan_buffer(
            seen, path=str(path), secrets=secrets, pii=pii,
            base_line=1 + newlines, base_offset=offset, engine=engine,
        )  # fmt: skip
        if changing:
            found = json_strings.merge(found, json_strings.scan_json_strings(
                part, path=str(path), secrets=secrets, pii=pii,
                base_line=1 + newlines, base_offset=offset, engine=engine, spans=changing,
            ))  # fmt: skip
        found = [f for f in found if f.extra["span"][1] > done_to]
        findings += _annotate(found, part, offset, path)
        if not decoded and b"\x00" in part:
            wide = _embedded_wide(part, path, offset, newlines, done_to, secrets, pii, engine)
            findings += [f for f in wide if _once(f, seen_wide)]
        done_to = max(done_to, offset + cut)
        newlines += part.count(b"\n", 0, nxt)
        carry = buf[nxt:]
        offset += nxt
        if last:
            break
    return findings, newlines


def _once(f: Finding, seen: set[tuple[str, int | None, str | None, str]]) -> bool:
    key = (f.rule, f.line, f.fingerprint, f.message)
    if key in seen:
        return False
    seen.add(key)
    return True


def _embedded_wide(
    part: bytes, path: Path, offset: int, newlines: int, done_to: int,
    secrets: bool, pii: bool, engine: str | None,
) -> list[Finding]:  # fmt: skip
    """NUL bytes in text sniffed as UTF-8: UTF-16 runs are decoded and scanned; any other
    NUL is a not-scanned row (the encoding changed after the sniffed head)."""
    out: list[Finding] = []
    covered = 0
    for m in _WIDE_RUN.finditer(part):
        if offset + m.end() <= done_to:
            continue  # seen by the previous chunk or range
        run = m.group()
        codec = "utf-16-le" if run[1] == 0 else "utf-16-be"
        text = run.decode(codec, "replace").encode("utf-8")
        line = 1 + newlines + part.count(b"\n", 0, m.start())
        found = scan_buffer(text, path=str(path), secrets=secrets, pii=pii, base_line=line,
                            base_offset=offset + m.start(), engine=engine)  # fmt: skip
        out += [
            f._replace(
                extra={
                    **{k: v for k, v in f.extra.items() if k != "span"},
                    "encoding": codec,
                    "embedded": True,
                }
            )  # fmt: skip
            for f in found
        ]
        covered += run.count(b"\x00")
    stray = part.count(b"\x00") - covered
    if stray > 0 and offset + len(part) > done_to:
        at = offset + part.index(b"\x00")
        out.append(not_scanned(path, f"{stray} NUL byte(s) from offset {at}: this part is "
                               "neither UTF-8 nor UTF-16 text", "inspect the file; "
                               "re-encode it as UTF-8"))  # fmt: skip
    return out


def scan_text_range(
    path: Path, start: int, end: int, *, secrets: bool, pii: bool, engine: str | None = None
) -> tuple[list[Finding], int]:
    """Scan the lines that start in [start, end); returns findings and newline count.

    The scan starts up to ``OVERLAP`` bytes earlier (at a line start) so that a
    match begun in the previous range is seen whole; only findings ending after
    the range's start are kept, so each is reported by exactly one range.
    """
    size = path.stat().st_size
    with open_binary(path) as fh:
        return scan_text_open(fh, path, start, end, size, secrets=secrets, pii=pii, engine=engine)


def scan_text_open(
    fh: BinaryIO, path: Path, start: int, end: int, size: int, *,
    secrets: bool, pii: bool, engine: str | None = None,
) -> tuple[list[Finding], int]:  # fmt: skip
    """``scan_text_range`` of an open, seekable ``fh`` of ``size`` bytes (named ``path``)."""
    fh.seek(0)
    enc = encodings.detect(fh.read(encodings.GUESS_BYTES))
    if enc is not None:
        return _scan_wide_range(fh, path, start, end, size, enc, secrets, pii, engine)
    a, b = _align(fh, start, size), _align(fh, end, size)
    a0 = _align(fh, a - OVERLAP, size) if a > 0 else 0
    fh.seek(a0)
    skip_lines = fh.read(a - a0).count(b"\n")
    fh.seek(a0)
    return _scan_stream(
        fh.read, path, secrets=secrets, pii=pii, engine=engine,
        base_offset=a0, limit=b - a0, skip_to=a, skip_lines=skip_lines,
    )  # fmt: skip


def _scan_wide_range(
    fh: BinaryIO, path: Path, start: int, end: int, size: int, enc: encodings.Encoding,
    secrets: bool, pii: bool, engine: str | None,
) -> tuple[list[Finding], int]:  # fmt: skip
    """``scan_text_range`` for UTF-16/32: decoded to UTF-8 while streaming.

    Ranges are cut after newline code units; the leading overlap is decoded
    on its own to learn its UTF-8 length and lines.  Spans would be offsets
    into the decoded text, not the file, so they are dropped (``redact``
    rewrites byte text only); line and column (in characters) stay.
    """
    a, b = encodings.align(fh, start, size, enc), encodings.align(fh, end, size, enc)
    unit_overlap = OVERLAP * enc.unit
    a0 = encodings.align(fh, a - unit_overlap, size, enc) if a > enc.start else a
    lead = encodings.decode_range(fh, a0, a, enc)
    skipped = b"".join(iter(lambda: lead(CHUNK), b""))
    found, newlines = _scan_stream(
        encodings.decode_range(fh, a0, b, enc), path, secrets=secrets, pii=pii, engine=engine,
        skip_to=len(skipped), skip_lines=skipped.count(b"\n"), decoded=True,
    )  # fmt: skip
    return [
        f._replace(
            extra={**{k: v for k, v in f.extra.items() if k != "span"}, "encoding": enc.codec}
        )
        for f in found
    ], newlines


def scan_gzip(path: Path, secrets: bool, pii: bool, engine: str | None) -> list[Finding]:
    try:
        with open_binary(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as fh:
            if not looks_text(fh.peek(_SNIFF)[:_SNIFF]):
                return [not_scanned(path, "gzip content is not text")]
            found, _ = _scan_stream(fh.read, path, secrets=secrets, pii=pii, engine=engine)
    except (OSError, EOFError, zlib.error) as exc:
        return [not_scanned(path, f"gzip stream unreadable ({exc})")]
    return [f._replace(extra={**f.extra, "compressed": "gzip"}) for f in found]
