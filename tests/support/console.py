"""Compare a console block of the docs with what a command prints.

A block shows ``$ COMMAND`` lines, each followed by the output the reader should
see.  What differs from run to run is folded on both sides before comparing
(digests, key fingerprints, times, attempt and backup ids, durations, how many
lines lock changed, the scratch folder's path) and so are runs of spaces (a
table's column widths follow its values).  A line ``...`` stands for any number of
lines, and a line ending in `` ...`` for the rest of that line.
"""

from __future__ import annotations

import re

_FOLD = [
    (re.compile(r"sha256:[0-9a-f]{64}"), "sha256:<hex>"),
    (re.compile(r"sha256:[0-9a-f]{8}…"), "sha256:<short>…"),
    (re.compile(r"sha256:[0-9a-f]{4}…[0-9a-f]{4}"), "sha256:<short>"),
    (re.compile(r"sha256-tensors:[0-9a-f]{4}…[0-9a-f]{4}"), "sha256-tensors:<short>"),
    (re.compile(r"SHA256:[A-Za-z0-9+/]{43}"), "SHA256:<key>"),
    (re.compile(r"ssh-ed25519 AAAA[A-Za-z0-9+/=]+"), "ssh-ed25519 <key>"),
    (re.compile(r"\b\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{20}\b"), "<ledger-record>"),
    (re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{12}\b"), "<backup-id>"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?Z?"), "<time>"),
    (re.compile(r"^[0-9a-f]{12}(?= )", re.M), "<attempt>"),
    (re.compile(r"\buse [0-9a-f]{12}\b"), "use <attempt>"),
    (re.compile(r"\b\d+\.\d{3}\b"), "<n.nnn>"),
    (re.compile(r"\(\d+(\.\d+)? s\b"), "(<seconds> s"),
    # how many lines lock changes follows the machine (packages, variables set)
    (re.compile(r"\(\d+ line\(s\) changed\)"), "(<n> line(s) changed)"),
    # so does how many packages a manifest pins (`make demo`'s venv has no trl or
    # datasets, the test venv has both)
    (re.compile(r"\(\d+ exact pin\(s\)\)"), "(<n> exact pin(s))"),
    (re.compile(r"[ \t]+"), " "),
]


def fold(text: str, *places: str) -> str:
    """TEXT with what changes between runs replaced by placeholders."""
    for place in places:
        text = text.replace(place, "<scratch>")
    for pattern, replacement in _FOLD:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def commands(block: list[str]) -> list[tuple[str, list[str]]]:
    """The (command, expected output lines) pairs of one console block."""
    out: list[tuple[str, list[str]]] = []
    for line in block:
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            assert out, f"output before any command: {line!r}"
            out[-1][1].append(line)
    return out


def console_blocks(markdown: str) -> list[list[str]]:
    """Every ```console block of MARKDOWN, as lines."""
    return [b.splitlines() for b in re.findall(r"```console\n(.*?)```", markdown, re.S)]


def matches(expected: list[str], actual: str) -> bool:
    """Whether ACTUAL (folded) is what the EXPECTED lines (folded) show."""
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        elif line.endswith(" ..."):
            parts.append(re.escape(line[: -len("...")]) + r"[^\n]*\n")
        else:
            parts.append(re.escape(line) + r"\n")
    return re.fullmatch("".join(parts), actual + "\n" if actual else "") is not None
