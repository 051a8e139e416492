"""File and folder names are text too: a token pasted into a log's name ships with it.

Layer: judging rooms - scanner core (strings in, findings out; the walk already listed
the disk).  Each name below a scanned folder is scanned once, by the same rules as file
contents; a hit is reported at that file or folder, ``line`` empty and ``extra["in"] ==
"name"``.  The folder the user named is not judged by its own name, nor are the folders
above it.

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
    out: list[Finding] = []
    reported: set[tuple[str, str, str | None]] = set()
    owners: list[str] = []  # the file or folder of each line of the buffer
    lines: list[str] = []
    for where, name in _names(tops, files):
        for start in [0, *(m.end() for m in _SEPARATOR.finditer(name))]:
            if start < len(name):
                owners.append(where)
                lines.append(name[start:])
        if len(lines) >= BLOCK:  # a million names are scanned a block at a time
            out += _scan(owners, lines, reported, secrets=secrets, pii=pii)
            owners, lines = [], []
    if lines:
        out += _scan(owners, lines, reported, secrets=secrets, pii=pii)
    return out


BLOCK = 100_000  # lines of names scanned at once


def _scan(
    owners: list[str],
    lines: list[str],
    reported: set[tuple[str, str, str | None]],
    *,
    secrets: bool,
    pii: bool,
) -> list[Finding]:
    buf = "\n".join(lines).encode("utf-8", "surrogateescape")
    out = []
    for f in scan_buffer(buf, path="", secrets=secrets, pii=pii, extra={"in": "name"}):
        where = owners[(f.line or 1) - 1]
        if (where, f.rule, f.fingerprint) in reported:
            continue
        reported.add((where, f.rule, f.fingerprint))
        # line, column and span are places in the buffer of names, not in the file
        out.append(f._replace(path=where, message=f"{f.message} in the name", line=None,
                              column=None, extra={"in": "name"}))  # fmt: skip
    return out


def _names(tops: Sequence[Path], files: Iterable[Path]) -> Iterable[tuple[str, str]]:
    """``(path, name)`` for every file and folder below a top, each once.

    Tops are spelled as ``Path`` spells the walk's files (``./data`` is ``data``,
    ``.`` is every relative path), so a top written either way judges the same
    names.  A path is cut by its top's length, not by ``relpath`` (a million files
    spent half a minute there); the folders of a run of files in one folder are
    yielded once, and files are remembered only where two tops could list one.
    """
    roots = sorted({os.fspath(Path(t)) for t in tops}, key=len, reverse=True)
    seen: set[str] = set()
    once = len(roots) == 1  # one walk lists a file once
    last: tuple[str, str] | None = None
    folder_at = ""
    for file in files:
        name = os.fspath(file)
        top = next((r for r in roots if name == r or _below(name, r)), None)
        if top is None:
            continue
        if name == top:
            where = os.path.join(os.path.dirname(name), os.path.basename(name))
            if where not in seen:
                seen.add(where)
                yield where, os.path.basename(name)
            continue
        start = "" if top == os.curdir else top
        folder, _, base = name[len(_dir(start)) if start else 0 :].rpartition(os.sep)
        if (top, folder) != last:
            last, folder_at = (top, folder), start
            for part in folder.split(os.sep) if folder else ():
                folder_at = os.path.join(folder_at, part)
                if folder_at not in seen:
                    seen.add(folder_at)
                    yield folder_at, part
        where = os.path.join(folder_at, base)
        if once:
            yield where, base
        elif where not in seen:
            seen.add(where)
            yield where, base


def _below(name: str, root: str) -> bool:
    if root == os.curdir:
        return (
            not os.path.isabs(name)
            and name != os.pardir
            and not name.startswith(os.pardir + os.sep)
        )
    return name.startswith(_dir(root))


def _dir(root: str) -> str:
    return root if root.endswith(os.sep) else root + os.sep
