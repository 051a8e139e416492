"""The text scanner: a multi-pattern candidate engine plus per-rule confirmation.

Layer: pure core.  Candidates come from literal keywords and short anchor
regexes, located by Hyperscan when it is importable and by ``bytes.find`` /
``re`` otherwise; both engines produce the same candidate set, and every
candidate is confirmed by the same Python regex and validator, so findings are
identical whichever engine ran.  Buffers are scanned whole (chunks of a file,
not lines); line and column are computed only for hits.
"""

from __future__ import annotations

import csv
import gzip
import os
import re
import zlib
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

from ftmanifest.findings import Finding
from ftmanifest.scan.pii import PII_RULES
from ftmanifest.scan.redact import excerpt, fingerprint
from ftmanifest.scan.rules import SECRET_RULES, Rule

try:  # optional accelerator; FTMANIFEST_SCAN_ENGINE=re forces the fallback
    import hyperscan as _hs
except ImportError:  # pragma: no cover - depends on the environment
    _hs = None

_TOKEN_MAX = 64


def engine_name(engine: str | None = None) -> str:
    want = engine or os.environ.get("FTMANIFEST_SCAN_ENGINE", "auto")
    if want == "hyperscan" or (want == "auto" and _hs is not None):
        if _hs is None:
            raise RuntimeError("hyperscan is not installed")
        return "hyperscan"
    return "re"


class Matcher:
    """Compiled rules.  ``hits(buf)`` -> list of (rule, match, group)."""

    def __init__(self, rules: tuple[Rule, ...], engine: str = "re") -> None:
        self.rules = rules
        self.engine = engine
        self.regex = [re.compile(r.regex.encode(), re.I if r.ignore_case else 0) for r in rules]
        # pattern table: (kind, rule index, keyword or anchor, length)
        self.patterns: list[tuple[str, int, bytes, int]] = []
        for i, r in enumerate(rules):
            for kw in r.keywords:
                self.patterns.append(("kw", i, kw.encode(), len(kw)))
            for anchor, length in r.anchors:
                self.patterns.append(("anchor", i, anchor.encode(), length))
        self.token = {
            i: frozenset(_expand(r.token_chars)) for i, r in enumerate(rules) if r.token_chars
        }
        self._py_anchor = [
            re.compile(b"(?=" + p + b")" if n else p) if kind == "anchor" else None
            for kind, _, p, n in self.patterns
        ]
        self.back = {i: frozenset(_expand(r.back_chars)) for i, r in enumerate(rules)}
        self.gated = {i: r.gate_len for i, r in enumerate(rules) if r.gate}
        self._db = None
        if engine == "hyperscan":
            # gated rules: Hyperscan reports gate regions, keywords are looked up inside
            for i, r in enumerate(rules):
                if r.gate:
                    self.patterns.append(("gate", i, r.gate.encode(), r.gate_len))
            self._kw_of = {
                i: [
                    (pid, p)
                    for pid, (k, j, p, _) in enumerate(self.patterns)
                    if k == "kw" and j == i
                ]
                for i in self.gated
            }
            self._db = _hs.Database()
            used = [
                pid
                for pid, (k, i, _, _) in enumerate(self.patterns)
                if not (k == "kw" and i in self.gated)
            ]
            exprs = [
                re.escape(self.patterns[pid][2])
                if self.patterns[pid][0] == "kw"
                else self.patterns[pid][2]
                for pid in used
            ]
            flags = [self._hs_flags(pid) for pid in used]
            self._db.compile(expressions=exprs, ids=used, flags=flags)

    def _hs_flags(self, pid: int) -> int:
        kind, i, _, _ = self.patterns[pid]
        flags = _hs.HS_FLAG_CASELESS if kind == "kw" else 0
        if kind == "gate" and self.rules[i].ignore_case:
            flags |= _hs.HS_FLAG_CASELESS
        return flags

    def candidates(self, buf: bytes) -> set[tuple[int, int]]:
        """(pattern index, position): keyword start, anchor start, or token end."""
        out: set[tuple[int, int]] = set()
        if self._db is not None:
            pats = self.patterns
            regions: list[tuple[int, int]] = []

            def on_match(pid: int, _start: int, to: int, _flags: int, _ctx: Any) -> None:
                kind, ri, _, n = pats[pid]
                if kind == "gate":
                    regions.append((ri, to))
                else:
                    out.add((pid, to - n if kind == "kw" or n else to))

            self._db.scan(buf, match_event_handler=on_match)
            for ri, to in regions:
                lo = max(0, to - self.gated[ri])
                window = buf[lo:to].lower()
                for pid, kw in self._kw_of[ri]:
                    i = window.find(kw)
                    while i >= 0:
                        out.add((pid, lo + i))
                        i = window.find(kw, i + 1)
            return out
        lower = buf.lower()
        for pid, (kind, _, pat, n) in enumerate(self.patterns):
            if kind == "kw":
                i = lower.find(pat)
                while i >= 0:
                    out.add((pid, i))
                    i = lower.find(pat, i + 1)
            else:
                for m in self._py_anchor[pid].finditer(buf):  # type: ignore[union-attr]
                    out.add((pid, m.start() if n else m.end()))
        return out

    def hits(self, buf: bytes) -> list[tuple[Rule, re.Match[bytes], int]]:
        seen: dict[tuple[int, int, int], tuple[Rule, re.Match[bytes], int]] = {}
        for pid, pos in self.candidates(buf):
            kind, ri, pat, n = self.patterns[pid]
            rule, rx = self.rules[ri], self.regex[ri]
            if kind == "kw":
                start, chars, lo = pos, self.back[ri], max(0, pos - rule.back)
                while start > lo and buf[start - 1] in chars:
                    start -= 1
                m = rx.match(buf, start, min(len(buf), pos + n + rule.fwd))
                found = [m] if m and pos < m.end() else []
            elif n:
                m = rx.match(buf, pos, min(len(buf), pos + rule.fwd))
                found = [m] if m else []
            else:
                m = self._token(buf, ri, pos)
                found = [m] if m else []
            for m in found:
                key = (ri, m.start(rule.group), m.end(rule.group))
                if key in seen:
                    continue
                if rule.validator is None or rule.validator(m, rule.group):
                    seen[key] = (rule, m, rule.group)
        return _drop_overlaps(list(seen.values()))

    def _token(self, buf: bytes, ri: int, end: int) -> re.Match[bytes] | None:
        chars = self.token[ri]
        s, e = end - 1, end
        while s > 0 and buf[s - 1] in chars and end - s < _TOKEN_MAX:
            s -= 1
        while e < len(buf) and buf[e] in chars and e - end < _TOKEN_MAX:
            e += 1
        while e > s and buf[e - 1] in b".:-" and not buf[s:e].endswith(b"::"):
            e -= 1
        return self.regex[ri].fullmatch(buf, s, e)


def _expand(chars: str) -> bytes:
    """``"0-9A-F."`` -> all bytes in that class."""
    if not chars:
        return b""
    cls = re.compile(b"[" + chars.encode() + b"]")
    return bytes(c for c in range(256) if cls.match(bytes([c])))


def _drop_overlaps(
    hits: list[tuple[Rule, re.Match[bytes], int]],
) -> list[tuple[Rule, re.Match[bytes], int]]:
    """A provider rule beats the generic rule; a secret beats PII inside it."""
    strong = [
        (m.start(g), m.end(g)) for r, m, g in hits if r.kind == "secret" and "generic" not in r.id
    ]
    secret = [(m.start(g), m.end(g)) for r, m, g in hits if r.kind == "secret"]
    out = []
    for r, m, g in hits:
        s, e = m.start(g), m.end(g)
        pool = strong if r.kind == "secret" else secret
        if (r.kind == "pii" or "generic" in r.id) and any(a < e and s < b for a, b in pool):
            continue
        out.append((r, m, g))
    return out


@lru_cache(maxsize=8)
def matcher(secrets: bool = True, pii: bool = True, engine: str | None = None) -> Matcher:
    rules = (SECRET_RULES if secrets else ()) + (PII_RULES if pii else ())
    return Matcher(rules, engine_name(engine))


def scan_buffer(
    buf: bytes,
    *,
    path: str,
    secrets: bool = True,
    pii: bool = True,
    base_line: int = 1,
    base_offset: int = 0,
    line: int | None = None,
    extra: Mapping[str, Any] | None = None,
    engine: str | None = None,
) -> list[Finding]:
    """Scan one buffer; lines count from ``base_line`` unless ``line`` pins them."""
    if not (secrets or pii) or not buf:
        return []
    hits = sorted(matcher(secrets, pii, engine).hits(buf), key=lambda h: h[1].start(h[2]))
    findings = []
    nl, counted, line_no = -1, 0, base_line
    for rule, m, g in hits:
        start, end = m.start(g), m.end(g)
        line_no += buf.count(b"\n", counted, start)
        counted = start
        nl = buf.rfind(b"\n", 0, start)
        column = len(buf[nl + 1 : start].decode("utf-8", "ignore")) + 1
        value = m.group(g)
        info = dict(extra or {})
        info["span"] = [base_offset + start, base_offset + end]
        findings.append(
            Finding(
                kind=rule.kind,
                rule=rule.id,
                message=f"{rule.description} found",
                path=path,
                line=line if line is not None else line_no,
                column=None if line is not None else column,
                severity=rule.severity,  # type: ignore[arg-type]
                hint="remove it, rotate it if it is a credential, or accept it in a baseline",
                fingerprint=fingerprint(rule.id, value),
                excerpt=excerpt(value),
                extra=info,
            )
        )
    return findings


def scan_text(
    text: str,
    *,
    path: str,
    secrets: bool = True,
    pii: bool = True,
    line: int | None = None,
    extra: dict | None = None,
) -> list[Finding]:
    """Scan one string (a pickle string, a safetensors metadata value...).

    ``line`` pins every finding to that line (columns are then omitted);
    ``extra`` (``{"offset": n}``, ``{"metadata_key": k}``) is copied into each.
    """
    return scan_buffer(
        text.encode("utf-8", "surrogatepass"),
        path=path,
        secrets=secrets,
        pii=pii,
        line=line,
        extra=extra,
    )


# --- readers: plain text ranges, gzip, Parquet --------------------------------

CHUNK = 4 << 20  # bytes handed to the matcher at once
OVERLAP = 4096  # carried across a cut made inside a line (no newline in a chunk)
_SNIFF = 1 << 16


def not_scanned(path: Path, why: str, hint: str | None = None) -> Finding:
    return Finding(
        kind="not-scanned", rule="scan.not-scanned", message=f"not scanned: {why}",
        path=str(path), severity="warning", hint=hint,
    )  # fmt: skip


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
    with path.open("rb") as fh:
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


def _annotate(findings: list[Finding], buf: bytes, base: int, path: Path) -> list[Finding]:
    """JSONL: the record's line; CSV/TSV: row and column of the cell."""
    suffix = path.name.lower().removesuffix(".gz").rsplit(".", 1)[-1]
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
    base_offset: int = 0, limit: int | None = None,
) -> tuple[list[Finding], int]:  # fmt: skip
    """Chunks cut at newlines (or with an overlap inside huge lines)."""
    findings: list[Finding] = []
    newlines, offset, carry, done_to = 0, base_offset, b"", base_offset
    while True:
        want = CHUNK if limit is None else min(CHUNK, limit - (offset - base_offset) - len(carry))
        block = read(want) if want > 0 else b""
        buf = carry + block
        if not buf:
            break
        last = not block
        cut = len(buf) if last else buf.rfind(b"\n") + 1
        keep = 0
        if cut == 0:  # no newline in a whole chunk: cut inside the line, keep an overlap
            cut, keep = len(buf), OVERLAP
        part = buf[:cut]
        found = scan_buffer(
            part, path=str(path), secrets=secrets, pii=pii,
            base_line=1 + newlines, base_offset=offset, engine=engine,
        )  # fmt: skip
        found = [f for f in found if f.extra["span"][1] > done_to]
        findings += _annotate(found, part, offset, path)
        done_to = offset + cut
        newlines += part.count(b"\n") - (part[len(part) - keep :].count(b"\n") if keep else 0)
        carry = buf[cut - keep :] if keep else buf[cut:]
        offset += cut - keep
        if last:
            break
    return findings, newlines


def scan_text_range(
    path: Path, start: int, end: int, *, secrets: bool, pii: bool, engine: str | None = None
) -> tuple[list[Finding], int]:
    """Scan the lines that start in [start, end); returns findings and newline count."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        a, b = _align(fh, start, size), _align(fh, end, size)
        fh.seek(a)
        return _scan_stream(
            fh.read, path, secrets=secrets, pii=pii, engine=engine, base_offset=a, limit=b - a
        )


def scan_gzip(path: Path, secrets: bool, pii: bool, engine: str | None) -> list[Finding]:
    try:
        with gzip.open(path, "rb") as fh:
            if not looks_text(fh.peek(_SNIFF)[:_SNIFF]):
                return [not_scanned(path, "gzip content is not text")]
            found, _ = _scan_stream(fh.read, path, secrets=secrets, pii=pii, engine=engine)
    except (OSError, EOFError, zlib.error) as exc:
        return [not_scanned(path, f"gzip stream unreadable ({exc})")]
    return [f._replace(extra={**f.extra, "compressed": "gzip"}) for f in found]


def scan_parquet(path: Path, secrets: bool, pii: bool, engine: str | None) -> list[Finding]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return [not_scanned(path, "Parquet needs pyarrow", "pip install pyarrow")]
    out: list[Finding] = []
    try:
        pf = pq.ParquetFile(path)
        row0 = 0
        for batch in pf.iter_batches(batch_size=8192):
            for name, col in zip(batch.schema.names, batch.columns, strict=True):
                if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                    continue
                values = [(v or "").replace("\n", " ") for v in col.to_pylist()]
                buf = "\n".join(values).encode("utf-8", "surrogatepass")
                for f in scan_buffer(buf, path=str(path), secrets=secrets, pii=pii, engine=engine):
                    info = {**f.extra, "row": row0 + (f.line or 1), "column": name}
                    info.pop("span", None)
                    out.append(f._replace(line=None, column=None, extra=info))
            row0 += batch.num_rows
    except (OSError, pa.ArrowException) as exc:
        return out + [not_scanned(path, f"Parquet unreadable ({exc})")]
    return out
