"""Make untrusted text safe to print on a terminal.

Layer: pure core (shared by every layer; imports nothing of ours).  A key id, a field, a
file name or a scanned excerpt can carry newlines, CR, ESC sequences, BEL or
BiDi overrides that forge or hide output lines.  Text output shows
each such character as a visible escape (``\\x1b``, ``\\n``, ``\\u202e``); the
JSON output keeps the exact value.
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL (cursor moves, escape sequences, line breaks,
# including \x1c-\x1e and \x85 that str.splitlines() breaks on); the Unicode
# line and paragraph separators; the BiDi embedding, override, isolate and
# mark characters of "Trojan Source" (CVE-2021-42574); lone surrogates, which
# cannot even be encoded to UTF-8 (a file name read with surrogateescape).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def escape(text: str) -> str:
    """``text`` with every control, line-breaking or BiDi character made visible."""
    return _UNSAFE.sub(_visible, text)


def escape_surrogates(text: str) -> str:
    """Lone surrogates as ``\\udcff``: inside a JSON string that is the same value,
    and unlike the raw character it can be written as UTF-8."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_SURROGATE = re.compile("[\ud800-\udfff]")
