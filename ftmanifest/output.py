"""Render findings and errors as text lines, a table, JSON or SARIF 2.1.0.

Layer: pure core (rendering).  The core returns ``Finding`` records; this module is
the only place that decides how they look.  Every string a finding carries is
untrusted (a field, a file name, a key id, a scanned excerpt): text output
shows it through ``safe_text.escape``, so it can never forge or hide a line.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Sequence

from ftmanifest import __version__
from ftmanifest.errors import CommandNotRunnableError, ManifestInvalidError
from ftmanifest.findings import Finding
from ftmanifest.safe_text import escape, escape_surrogates

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from typing import Any, TextIO

    from ftmanifest.errors import FtManifestError

FORMATS = ("text", "json", "sarif")

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def line_text(f: Finding) -> str:
    """``file:line:col: RULE message (fix: hint)`` - the compiler-style line."""
    text = f"{escape(f.location())}: {escape(f.rule)} "
    if f.field and not f.message.startswith(f.field):
        text += f"{escape(f.field)}: "
    text += escape(f.message)
    facts = []
    if f.expected is not None:
        facts.append(f"expected {escape(f.expected)}")
    if f.observed is not None:
        facts.append(f"observed {escape(f.observed)}")
    if facts:
        text += "; " + ", ".join(facts)
    if f.hint:
        text += f" (fix: {escape(f.hint)})"
    return text


def lines(findings: Iterable[Finding]) -> str:
    return "".join(line_text(f) + "\n" for f in findings)


def error_text(exc: FtManifestError, *, width: int | None = None) -> str:
    """An error as human text: location and message, then one labelled line
    per fact it carries (field, expected, observed), its findings, the fix and
    its reason code.  Every value is escaped (``safe_text``), so only the
    newlines put here break lines.

    An invalid manifest is its problems, one compiler-style line each; other
    errors with findings (drift stopping a Trainer) show them as a table.
    """
    if isinstance(exc, ManifestInvalidError) and exc.findings:
        return "\n".join(line_text(p) for p in exc.findings)
    if isinstance(exc, CommandNotRunnableError):
        return escape(exc.message)  # one line, as a shell says it (the JSON has the reason)
    head = escape(exc.location())
    text = f"{head}: {escape(exc.message)}" if head else escape(exc.message)
    details = [
        f"{label}: {escape(value)}"
        for label, value in (
            ("field", exc.field or None),
            ("expected", exc.expected),
            ("observed", exc.observed),
        )
        if value is not None
    ]
    if details:
        text += "\n  " + "\n  ".join(details)
    if exc.findings:
        text += "\n" + findings_table(exc.findings, width=width).rstrip()
    tail = [f"fix: {escape(exc.hint)}"] if exc.hint else []
    if exc.reason:
        tail.append(f"reason: {exc.reason}")
    if tail:
        text += "\n  " + "\n  ".join(tail)
    return text


# --- tables ------------------------------------------------------------------

UNLIMITED = 0  # a width that fits nothing: every row on one line (a pipe, a file)
_GAP = "  "
_MIN_WIDTH = 40  # below this a table is unreadable anyway: let it overflow
_FLOOR = 16  # no column wraps narrower than this (fits "sha256:1736…db9f")...
_NARROWEST = 6  # ...unless the terminal leaves no room for that, or a word needs more
_INDENT = "  "  # continuation lines of the first column, and the notes under a row
_FIX_MIN = 32  # a narrower fix column moves the fix under its row
# A digest at the start of a cell, maybe followed by words: "sha256:<hex> (on disk)".
_DIGEST = re.compile(r"([a-z][a-z0-9-]*:)([0-9a-f]{16,})(.*)", re.DOTALL)
_DIGEST_KEEP = 4  # hex digits kept at each end of a shortened digest


_quiet = False  # -q/--quiet: the process prints no notes (``set_quiet``)


def set_quiet(on: bool) -> bool:
    """Quiet (``-q``) or not for the whole process; what it was.  Quiet drops
    ``note`` lines and the progress line, never a warning, an error or stdout."""
    global _quiet
    before, _quiet = _quiet, on
    return before


def is_quiet() -> bool:
    return _quiet


def note(text: str) -> None:
    """An informational line on stderr (what was written, a summary), unless quiet."""
    if not _quiet:
        sys.stderr.write(text + "\n")


def terminal_width(stream: TextIO | None = None) -> int:
    """The columns a table printed to ``stream`` (default: stdout) is fitted to:
    ``COLUMNS`` when it is set to a number, else the terminal's width, else
    ``UNLIMITED`` when the stream is not a terminal.  A CI log or ``| grep``
    then gets every row on one line, as ``git`` and ``kubectl`` print to a
    pipe, so a field name is never cut in two."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    out = sys.stdout if stream is None else stream
    try:
        if not out.isatty():
            return UNLIMITED
        return os.get_terminal_size(out.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):  # closed, replaced or odd streams
        return UNLIMITED


def _total(width: int | None) -> int:
    """``width`` as given (``None``: the terminal's), at least ``_MIN_WIDTH``
    unless it is ``UNLIMITED``."""
    total = terminal_width() if width is None else width
    return UNLIMITED if total <= 0 else max(_MIN_WIDTH, total)


def table(
    rows: Sequence[Sequence[object]],
    header: Sequence[str],
    *,
    width: int | None = None,
    notes: Sequence[Sequence[tuple[str, object]]] = (),
    nowrap: Iterable[int] = (),
) -> str:
    """A table fitted to ``width`` (default: ``terminal_width()``; ``UNLIMITED``
    fits nothing, each row and note on one line): cells wrap between words onto
    continuation lines instead of being cut; digests alone shrink in the middle.
    A word is never split: a column is at least as wide as its longest word,
    and a word longer than the width overflows it.

    ``notes[n]`` are ``(label, text)`` lines under row ``n``, full width.  Every
    line but a row's first starts with a space, so no cell, however long or
    odd, can make a line that passes for a row.
    """
    total = _total(width)
    cells = _cells(rows, header)
    if total == UNLIMITED:
        widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    else:
        widths = _fit(cells, total - len(_GAP) * (len(header) - 1), set(nowrap))
    out = []
    for n, row in enumerate(cells):
        out += _row_lines(row, widths)
        if n == 0:
            out.append(_GAP.join("-" * w for w in widths))
            continue
        row_notes = [(k, v) for k, v in (notes[n - 1] if n - 1 < len(notes) else ()) if v]
        pad = max((len(k) for k, _ in row_notes), default=0)
        for label, text in row_notes:
            head = f"{_INDENT}{label}: ".ljust(len(_INDENT) + pad + 2)
            line = head + _cell(text)
            out += _wrap(line, total, len(head), keep=len(head)) if total else [line]
    return "\n".join(out) + "\n"


def _cells(rows: Sequence[Sequence[object]], header: Sequence[str]) -> list[list[str]]:
    return [[escape(h) for h in header]] + [[_key(r[0]), *map(_cell, r[1:])] for r in rows]


def _key(value: object) -> str:
    """A row's first cell: never blank and never led by a space, so a row's first
    line is the only one that starts at column 0."""
    text = _cell(value)
    stripped = text.lstrip(" ")
    return "\\x20" * (len(text) - len(stripped)) + stripped if text else "-"


def _cell(value: object) -> str:
    return "" if value is None else escape(str(value))


def _short(text: str) -> str:
    """A digest cell at its shortest, ``sha256:1736…db9f``; other text as it is."""
    m = _DIGEST.fullmatch(text)
    if m is None or len(m.group(2)) <= 2 * _DIGEST_KEEP + 1:
        return text
    hexd = m.group(2)
    return f"{m.group(1)}{hexd[:_DIGEST_KEEP]}…{hexd[-_DIGEST_KEEP:]}{m.group(3)}"


def _fit(cells: list[list[str]], room: int, nowrap: set[int]) -> list[int]:
    """Column widths within ``room``: the natural widths when they fit; else
    digests shortened, every column at least min(its need, floor) and never
    narrower than its longest word, and the spare room handed out one
    character at a time to the narrowest column that still wraps.  When even
    the longest words do not fit, the table is wider than ``room``."""
    cols = range(len(cells[0]))
    full = [max(len(r[i]) for r in cells) for i in cols]
    if sum(full) <= room:
        return full
    need = [max(len(_short(r[i])) for r in cells) for i in cols]
    word = [max(_longest_word(_short(r[i]), i == 0) for r in cells) for i in cols]
    least = [need[i] if i in nowrap else max(word[i], min(need[i], _NARROWEST)) for i in cols]
    widths = [
        need[i] if i in nowrap else max(least[i], min(need[i], max(_FLOOR, len(cells[0][i]))))
        for i in cols
    ]
    while sum(widths) > room:  # even the floors overflow: narrow the widest that can
        narrower = [i for i in cols if widths[i] > least[i]]
        if not narrower:
            break
        widths[max(narrower, key=lambda i: widths[i])] -= 1
    spare = room - sum(widths)
    while spare > 0:
        open_cols = [i for i in cols if widths[i] < need[i]]
        if not open_cols:
            break
        widths[min(open_cols, key=lambda i: widths[i])] += 1
        spare -= 1
    return widths


def _row_lines(row: list[str], widths: list[int]) -> list[str]:
    pieces = [
        _wrap(text if len(text) <= w else _short(text), w, len(_INDENT) if i == 0 else 0)
        for i, (text, w) in enumerate(zip(row, widths, strict=True))
    ]
    height = max(len(p) for p in pieces)
    return [
        _GAP.join(
            (p[k] if k < len(p) else "").ljust(w) for p, w in zip(pieces, widths, strict=True)
        ).rstrip()
        for k in range(height)
    ]


def _longest_word(text: str, first: bool) -> int:
    """The width a cell needs so that ``_wrap`` splits none of its words (the
    first column's continuation lines are indented)."""
    words = text.split(" ")
    if not first:
        return max(len(w) for w in words)
    return max([len(words[0])] + [len(w) + len(_INDENT) for w in words[1:] if w])


def _wrap(text: str, width: int, indent: int = 0, keep: int = 0) -> list[str]:
    """``text`` in lines of at most ``width``, broken only at spaces: a word
    (a field name, a path, a digest) longer than the room stays whole and
    overflows.  Continuation lines get ``indent`` leading spaces; the first
    ``keep`` characters (a note's label) stay on a line with the word after them."""
    out: list[str] = []
    room = width
    while len(text) > room:
        cut = _break_at(text, room, keep if not out else 0)
        if cut is None:
            break
        out.append(text[:cut].rstrip())
        text = text[cut + 1 :]
        room = max(1, width - indent)
        if indent:
            text = text.lstrip(" ")
    if text or not out:
        out.append(text)
    return [out[0]] + [" " * indent + line for line in out[1:]]


def _break_at(text: str, room: int, keep: int = 0) -> int | None:
    """The space to break ``text`` at: the last one within ``room`` with a
    word before it (and past ``keep``), else the first one after (its word
    overflows); ``None`` when there is none."""
    start = max(len(text) - len(text.lstrip(" ")) + 1, keep)
    cut = text.rfind(" ", start, room + 1)
    if cut == -1:
        cut = text.find(" ", max(start, room + 1))
    return None if cut == -1 else cut


def findings_table(findings: Sequence[Finding], *, width: int | None = None) -> str:
    """Drift rows (and scan hits) as a table fitted to the terminal (as
    ``table``: to ``width``, or on one line a row when it is ``UNLIMITED``).

    A drift row about a file gets a ``path:`` line under it.  When the terminal
    leaves the fix column narrower than ``_FIX_MIN``, or the table is wider
    than the terminal with it, the fix moves to a line of its own under the
    row, so it is never squeezed into a sliver.
    """
    rows = [
        (f.field or f.location(), f.expected, f.observed, f.severity, f.hint or f.message)
        if f.kind == "drift"
        else (f.location(), f.rule, f.excerpt or f.message, f.severity, f.hint or f.message)
        for f in findings
    ]
    paths = [f.path if f.kind == "drift" else None for f in findings]
    drift = sum(f.kind == "drift" for f in findings)
    header = (
        ("field", "expected", "observed", "severity", "fix")
        if drift == len(findings)
        else ("location", "rule", "finding", "severity", "fix")
        if drift == 0
        else ("field or location", "expected or rule", "observed or finding", "severity", "fix")
    )
    total = _total(width)
    cells = _cells(rows, header)
    room = total - len(_GAP) * (len(header) - 1)
    widths = _fit(cells, room, {3}) if total else []
    fix_need = max(len(r[4]) for r in cells)
    if total == UNLIMITED or (widths[4] >= min(fix_need, _FIX_MIN) and sum(widths) <= room):
        notes = [[("path", p)] for p in paths]
        return table(rows, header, width=total, notes=notes, nowrap=(3,))
    notes = [[("fix", r[4]), ("path", p)] for r, p in zip(rows, paths, strict=True)]
    return table([r[:4] for r in rows], header[:4], width=total, notes=notes, nowrap=(3,))


def to_json(payload: Any) -> str:
    text = json.dumps(payload, indent=2, sort_keys=False, ensure_ascii=False)
    return escape_surrogates(text) + "\n"


def findings_json(findings: Sequence[Finding], **summary: Any) -> str:
    return to_json({**summary, "findings": [f.to_dict() for f in findings]})


def findings_sarif(findings: Sequence[Finding], tool: str = "ftmanifest") -> str:
    """A SARIF 2.1.0 log with one run; rules are collected from the findings."""
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for f in findings:
        rules.setdefault(
            f.rule,
            {
                "id": f.rule,
                "name": f.kind,
                "shortDescription": {"text": f.kind},
                "properties": {"category": f.kind},
            },
        )
        region: dict[str, int] = {}
        if f.line is not None:
            region["startLine"] = max(1, f.line)
            if f.column is not None:
                region["startColumn"] = max(1, f.column)
        physical: dict[str, Any] = {"artifactLocation": {"uri": f.path or "-"}}
        if region:
            physical["region"] = region
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": _SARIF_LEVEL.get(f.severity, "warning"),
            "message": {"text": f.message + (f" (fix: {f.hint})" if f.hint else "")},
            "locations": [{"physicalLocation": physical}],
        }
        if f.fingerprint:
            result["partialFingerprints"] = {"ftmanifest/v1": f.fingerprint}
        props = {k: v for k, v in (("field", f.field), ("excerpt", f.excerpt)) if v}
        if props:
            result["properties"] = props
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": tool,
                        "version": __version__,
                        "informationUri": "https://ftmanifest.dev",
                        "rules": list(rules.values()),
                    }
                },
                "results": results,
            }
        ],
    }
    return to_json(log)


def render_findings(findings: Sequence[Finding], fmt: str, **summary: Any) -> str:
    """One entry point for commands that report findings."""
    if fmt == "json":
        return findings_json(findings, **summary)
    if fmt == "sarif":
        return findings_sarif(findings)
    return lines(findings)
