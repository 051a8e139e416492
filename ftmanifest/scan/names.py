"""File and folder names are text too: a token pasted into a log's name ships with it.

Layer: scanner core (strings in, findings out; the walk already listed the
disk).  Each name below a scanned folder is scanned once, by the same rules
as file contents; a hit is reported at that file or folder, ``line`` empty
and ``extra["in"] == "name"``.  The folder the user named is not judged by
its own name, nor are the folders above it.

A name glues words with ``-``, ``_`` and ``.`` where text has spaces, and the
rules want a boundary before a token (``push-ghp_...`` is not a token in a
sentence).  So each name is scanned as written and from every place after
such a separator, all names in one buffer, one line each.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from ftmanifest.findings import Finding
from ftmanifest.scan.text.text import scan_buffer

_SEPARATOR = re.compile(r"[-_.+=@,~ ]")


def name_findings(
    tops: Sequence[Path], files: Iterable[Path], *, secrets: bool, pii: bool
) -> list[Finding]:
    """Findings for the names of ``files`` and their folders, below their top."""
    if not (secrets or pii):
        return []
    owners: list[str] = []  # the file or folder of each line of the buffer
    lines: list[str] = []
    for where, name in _names(tops, files):
        for start in [0, *(m.end() for m in _SEPARATOR.finditer(name))]:
            if start < len(name):
                owners.append(where)
                lines.append(name[start:])
    if not lines:
        return []
    buf = "\n".join(lines).encode("utf-8", "surrogateescape")
    out: list[Finding] = []
    reported: set[tuple[str, str, str | None]] = set()
    for f in scan_buffer(buf, path="", secrets=secrets, pii=pii, extra={"in": "name"}):
        where = owners[(f.line or 1) - 1]
        if (where, f.rule, f.fingerprint) in reported:
            continue
        reported.add((where, f.rule, f.fingerprint))
        out.append(f._replace(path=where, message=f"{f.message} in the name", line=None,
                              column=None))  # fmt: skip
    return out


def _names(tops: Sequence[Path], files: Iterable[Path]) -> Iterable[tuple[str, str]]:
    """``(path, name)`` for every file and folder below a top, each once."""
    roots = sorted((os.fspath(t) for t in tops), key=len, reverse=True)
    seen: set[str] = set()
    for file in files:
        name = os.fspath(file)
        top = next((r for r in roots if name == r or name.startswith(_dir(r))), None)
        if top is None:
            continue
        if name == top:
            where, parts = os.path.dirname(name), [os.path.basename(name)]
        else:
            where, parts = top, os.path.relpath(name, top).split(os.sep)
        for part in parts:
            where = os.path.join(where, part)
            if where not in seen:
                seen.add(where)
                yield where, part


def _dir(root: str) -> str:
    return root if root.endswith(os.sep) else root + os.sep
