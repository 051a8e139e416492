"""JSON string escapes: scan the decoded values of escaped strings, report raw positions.

Layer: judging rooms - pure core.  In JSON and JSONL, ``"\\u0067hp_..."`` is
``ghp_...``, a URL may be written ``https:\\/\\/...``, a PEM block arrives as one line
with ``\\n`` escapes and a token can follow a ``\\n`` with no space; the raw bytes hide
all of these from the matcher.  ``scan_json_strings`` finds the string literals of a
buffer that contain a backslash (only those: a buffer without one costs one ``find``),
decodes each with a tolerant decoder (bad escapes are kept as they are, a lone surrogate
is encoded as is), scans the decoded values in one buffer, and maps each match back to
the exact raw bytes it came from, so a finding's span, line and column point into the
file as written (``span`` covers the escapes; redacting it keeps the JSON valid).  The
caller scans the raw bytes too and drops a decoded finding that repeats a raw one.

Finding a string's start: in JSON a backslash only occurs inside a string, and
a quote inside a string is escaped, so the nearest quote before a string's
first backslash is the string's opening quote.  Malformed lines may pair
quotes wrongly; that only changes what is decoded, never what the raw scan
sees.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence

from ftmanifest.findings import Finding
from ftmanifest.scan.text.text import scan_buffer

_SIMPLE = {
    ord('"'): b'"', ord("\\"): b"\\", ord("/"): b"/", ord("b"): b"\b",
    ord("f"): b"\f", ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t",
}  # fmt: skip
_HEX = frozenset(b"0123456789abcdefABCDEF")
SEP = b"\n\0\n"  # between decoded strings: no match runs across a NUL line


def escaped_strings(buf: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of the body of each string literal that contains a backslash."""
    yield from _walk(buf)[0]


def _walk(buf: bytes) -> tuple[list[tuple[int, int]], bool]:
    """The bodies of the string literals with a backslash, and whether every
    backslash of ``buf`` lies inside one of them.

    A body ends at its first unescaped quote (one after an even run of
    backslashes: escapes pair from the run's start, since the run follows the
    opening quote or a character that no escape consumed), else at the line's
    end, or before a lone backslash that ends the line.  The
    bytes are searched with ``find``, so the cost is per string, not per byte.
    """
    spans: list[tuple[int, int]] = []
    inside, n, pos = True, len(buf), 0
    find, rfind = buf.find, buf.rfind
    while (b := find(b"\\", pos)) >= 0:
        q = rfind(b'"', pos, b)
        if q < 0 or find(b"\n", q, b) >= 0:  # not inside a string on this line
            inside, pos = False, b + 2
            continue
        nl = find(b"\n", b)
        nl = n if nl < 0 else nl
        j = find(b'"', b, nl)
        while j >= 0 and buf[j - 1] == 0x5C and _odd_run(buf, j):  # an escaped quote
            j = find(b'"', j + 1, nl)
        if j >= 0:  # the closing quote
            spans.append((q + 1, j))
            pos = j + 1
            continue
        # unterminated: the body runs to the line's end, less a lone last backslash
        end = nl - 1 if _odd_run(buf, nl) else nl
        inside = inside and end == nl
        spans.append((q + 1, end))
        pos = max(end, b + 2)
    return spans, inside


def _odd_run(buf: bytes, at: int) -> bool:
    """An odd number of backslashes right before ``at`` (a quote or a line end
    after a string's first backslash: the run stops at the opening quote)."""
    k = at
    while buf[k - 1] == 0x5C:
        k -= 1
    return bool((at - k) & 1)


_SIMPLE_ESCAPE = re.compile(rb'\\(?:(")|[\\bfnrt])')  # escapes that change no visible text
_BLANK = re.compile(rb"\\[\\bfnrt]")  # the same, but the quote
_CHANGING = re.compile(rb"\\[u/]")  # escapes that spell other characters: decoded


def _blank(m: re.Match[bytes]) -> bytes:
    return b' "' if m.group(1) else b"  "


def neutralize(buf: bytes) -> tuple[bytes, list[tuple[int, int]]]:
    """``buf`` with whitespace and quote escapes blanked inside strings, same length.

    ``\\n``, ``\\t``, ``\\"``... become two bytes of space (a quote keeps its
    quote), so the raw scan sees words where they are (a token after ``\\n`` is
    no longer glued to the ``n``) at their own offsets, and only strings with
    ``\\uXXXX`` or ``\\/`` escapes, returned as spans, need decoding.

    When every backslash lies inside a string body (any JSON that parses), the
    escapes are blanked in one pass over the whole buffer: no match starts
    outside a body, and none runs across a body's end (a body never ends inside
    an escape), so the pass reads the same escapes as one pass per body.
    """
    spans, inside = _walk(buf)
    if not spans:
        return buf, []
    if inside:
        # escapes pair from each run of backslashes' start, so blanking the others
        # first leaves only real ``\\"`` escapes for the replace (skipped when no
        # backslash is left: a one-byte search costs a tenth of the replace's)
        out = _BLANK.sub(b"  ", buf)
        if b"\\" in out:
            out = out.replace(b'\\"', b' "')
    else:
        work = bytearray(buf)
        for s, e in spans:
            work[s:e] = _SIMPLE_ESCAPE.sub(_blank, buf[s:e])
        out = bytes(work)
    if _CHANGING.search(buf) is None:
        return out, []
    return out, [(s, e) for s, e in spans if _CHANGING.search(buf, s, e)]


def _hex4(raw: bytes, i: int) -> int | None:
    digits = raw[i : i + 4]
    return int(digits, 16) if len(digits) == 4 and all(c in _HEX for c in digits) else None


def unescape(raw: bytes, with_map: bool = False) -> tuple[bytes, list[int] | None]:
    """Decode a JSON string body to UTF-8 (surrogatepass), tolerantly.

    With ``with_map``, also the raw offset at which each decoded byte's
    character starts, plus ``len(raw)`` at the end: decoded bytes ``[s, e)``
    came from raw bytes ``[offs[s], offs[e])``.
    """
    out = bytearray()
    offs: list[int] | None = [] if with_map else None
    i, n = 0, len(raw)
    while i < n:
        j = raw.find(b"\\", i)
        if j < 0:
            j = n
        out += raw[i:j]
        if offs is not None:
            offs.extend(range(i, j))
        if j >= n:
            break
        c = raw[j + 1] if j + 1 < n else -1
        cp = _hex4(raw, j + 2) if c == 0x75 else None  # \uXXXX
        if c in _SIMPLE:
            enc, i = _SIMPLE[c], j + 2
        elif cp is not None:
            i = j + 6
            low = _hex4(raw, i + 2) if raw[i : i + 2] == b"\\u" else None
            if 0xD800 <= cp < 0xDC00 and low is not None and 0xDC00 <= low < 0xE000:
                cp, i = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00), i + 6
            enc = chr(cp).encode("utf-8", "surrogatepass")
        else:  # not a JSON escape: keep the backslash as written
            enc, i = b"\\", j + 1
        out += enc
        if offs is not None:
            offs.extend([j] * len(enc))
    if offs is not None:
        offs.append(n)
    return bytes(out), offs


def scan_json_strings(
    buf: bytes, *, path: str, secrets: bool = True, pii: bool = True,
    base_line: int = 1, base_offset: int = 0, engine: str | None = None,
    spans: list[tuple[int, int]] | None = None,
) -> list[Finding]:  # fmt: skip
    """Findings in the decoded escaped strings of ``buf`` (or of ``spans``), at raw positions."""
    if buf.find(b"\\") < 0 or not (secrets or pii):
        return []
    if spans is None:
        spans = list(escaped_strings(buf))
    if not spans:
        return []
    starts, pieces, at = [], [], 0
    for s, e in spans:
        dec = unescape(buf[s:e])[0]
        starts.append(at)
        pieces.append(dec)
        at += len(dec) + len(SEP)
    found = scan_buffer(
        SEP.join(pieces), path=path, secrets=secrets, pii=pii, engine=engine,
        extra={"decoded": "json-string"},
    )  # fmt: skip
    out: list[Finding] = []
    maps: dict[int, list[int]] = {}
    for f in found:
        ds, de = f.extra["span"]
        k = bisect_right(starts, ds) - 1
        s, e = spans[k]
        if k not in maps:
            maps[k] = unescape(buf[s:e], True)[1] or [0]
        offs = maps[k]
        rs = s + offs[min(ds - starts[k], len(offs) - 1)]
        re_ = s + offs[min(de - starts[k], len(offs) - 1)]
        nl = buf.rfind(b"\n", 0, rs)
        out.append(
            f._replace(
                line=base_line + buf.count(b"\n", 0, rs),
                column=len(buf[nl + 1 : rs].decode("utf-8", "ignore")) + 1,
                extra={**f.extra, "span": [base_offset + rs, base_offset + max(re_, rs + 1)]},
            )
        )
    return out


def merge(raw: Sequence[Finding], decoded: Sequence[Finding]) -> list[Finding]:
    """Raw and decoded findings, each value once.

    A decoded finding overlapping a raw one of the same rule is the same
    value: with the same fingerprint the raw one stays; otherwise the raw one
    is a misreading of the escapes (``\\ude00ana@...`` read as an address
    starting ``ude00``) and the decoded one replaces it.
    """
    if not decoded:
        return list(raw)
    by_rule: dict[str, list[tuple[int, int, int]]] = {}
    for i, f in enumerate(raw):
        a, b = f.extra["span"]
        by_rule.setdefault(f.rule, []).append((a, b, i))
    for spans in by_rule.values():
        spans.sort()
    keep = [True] * len(raw)
    out: list[Finding] = []
    for f in decoded:
        hit = _overlap(by_rule.get(f.rule, []), f.extra["span"])
        if hit is not None and raw[hit].fingerprint == f.fingerprint:
            continue
        if hit is not None:
            keep[hit] = False
        out.append(f)
    out += [f for f, k in zip(raw, keep, strict=True) if k]
    return sorted(out, key=lambda f: f.extra["span"][0])


def _overlap(spans: list[tuple[int, int, int]], span: Sequence[int]) -> int | None:
    """Index of a raw finding whose span (sorted by start) overlaps ``span``.

    One rule's raw matches do not overlap each other, so the candidates are
    the last few that start before the decoded match ends.
    """
    s, e = span
    i = bisect_left(spans, (e, 0, 0))
    return next((k for _, b, k in reversed(spans[max(0, i - 8) : i]) if s < b), None)
