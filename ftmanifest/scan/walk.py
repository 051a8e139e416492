"""Which files a scan reads: walk folders, and say what could not be walked.

Layer: judging rooms - edge of the scanner (lists the disk).  ``walk(paths)`` returns
the regular files to scan and one ``not-scanned`` finding (severity error) for
everything else it met, so nothing is skipped silently:

- an unreadable folder, a broken symlink, a symlink loop;
- a FIFO, socket or device (never opened: a FIFO would block the scan);
- a symlink whose target lies outside the folder being scanned: not
  followed, reported with its target so the user can scan that on purpose.

Symlinks that stay inside the folder are followed (a link to a file is
scanned under the link's name, a link to a folder is walked).  ``.git`` and
``__pycache__`` folders are not scanned (version control and bytecode
caches, not data).  Only a path the user named that does not exist at all is
an input error: that is a typo, not a finding.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ftmanifest.errors import InputNotFoundError
from ftmanifest.findings import Finding
from ftmanifest.scan.unscanned import not_scanned

SKIPPED_DIRS = frozenset({".git", "__pycache__"})
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _row(path: str, why: str, hint: str) -> Finding:
    return not_scanned(path, why, hint)


def _special(mode: int) -> str | None:
    return next((name for test, name in _KINDS if test(mode)), None)


def walk(
    paths: Iterable[Path], *, symlink_root: Path | None = None
) -> tuple[list[Path], list[Finding]]:
    """(files to scan, findings for what could not be walked), in a stable order.

    Links may lead anywhere inside the folder being walked, or inside
    ``symlink_root`` when given (a Hugging Face snapshot's files link to
    ``../../blobs`` of its repository folder).
    """
    files: list[Path] = []
    problems: list[Finding] = []
    for top in paths:
        name = os.fspath(top)
        if not os.path.lexists(name):
            raise InputNotFoundError("path does not exist", path=name, hint="check the path")
        boundary = os.path.realpath(symlink_root if symlink_root is not None else name)
        _visit(name, boundary, set(), files, problems, top=True)
    return files, problems


def _visit(
    name: str,
    boundary: str,
    active: set[tuple[int, int]],
    files: list[Path],
    problems: list[Finding],
    *,
    top: bool = False,
) -> None:
    if os.path.islink(name) and not top:
        target = os.path.realpath(name)
        if os.path.commonpath([target, boundary]) != boundary:
            problems.append(
                _row(
                    name,
                    f"symlink leads outside the scanned folder, to {target}",
                    f"scan the target on purpose: ftmanifest scan {target}",
                )
            )
            return
    try:
        st = os.stat(name)  # follows a link, now known to stay inside
    except FileNotFoundError:
        problems.append(_row(name, "broken symlink", "remove the link or restore its target"))
        return
    except OSError as exc:
        problems.append(_row(name, f"cannot stat ({exc.strerror})", "check its permissions"))
        return
    if stat.S_ISREG(st.st_mode):
        files.append(Path(name))
        return
    if not stat.S_ISDIR(st.st_mode):
        kind = _special(st.st_mode) or "not a regular file"
        problems.append(_row(name, f"{kind}, not a file", "remove it or scan the data it serves"))
        return
    ident = (st.st_dev, st.st_ino)
    if ident in active:
        problems.append(_row(name, "symlink loop", "remove the link that points back up"))
        return
    try:
        with os.scandir(name) as it:
            entries = sorted(entry.name for entry in it)
    except OSError as exc:
        problems.append(
            _row(name, f"unreadable folder ({exc.strerror})", "fix its permissions and scan again")
        )
        return
    for entry in entries:
        if entry in SKIPPED_DIRS:
            continue
        _visit(os.path.join(name, entry), boundary, active | {ident}, files, problems)
