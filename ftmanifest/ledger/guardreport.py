"""The guard's word to ``run``: this process verified itself, in-process.

Layer: judging rooms (ledger: a run's own records).  ``run --guarded`` starts a
command it cannot attribute to one Python interpreter (a shell string, a
launcher of its own) only on the promise that every process that trains calls
the guard (``ftmanifest.guard`` or the ``Trainer`` callback).  ``run`` names a
private folder in ``FTMANIFEST_GUARD_REPORTS``; each guard that passes writes
one file there (its pid, the manifest digest it verified, its interpreter);
when the command ends, ``run`` refuses a run in which no guard reported, and
one whose guard verified another manifest.

Not a boundary against hostile code: a process that runs code the manifest
does not pin can write the file without verifying anything.  It catches the
honest mistake (a script that never calls the guard, a wrapper that starts
another script), which is what ``run`` cannot see from outside.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ftmanifest.fsutil import atomic_write_text

GUARD_REPORTS_ENV = "FTMANIFEST_GUARD_REPORTS"
_PREFIX = "guard-"


@dataclass(frozen=True)
class GuardReport:
    pid: int
    manifest_digest: str
    executable: str


def report_guarded(manifest_digest: str) -> Path | None:
    """Tell ``run`` this process passed the guard for ``manifest_digest`` (when ``run``
    asked: ``FTMANIFEST_GUARD_REPORTS`` names its folder); the file written, or None."""
    folder = os.environ.get(GUARD_REPORTS_ENV)
    if not folder:
        return None
    path = Path(folder) / f"{_PREFIX}{os.getpid()}.json"
    body = {"pid": os.getpid(), "manifest_digest": manifest_digest, "executable": sys.executable}
    atomic_write_text(path, json.dumps(body, sort_keys=True))
    return path


def read_reports(folder: Path) -> list[GuardReport]:
    """Every guard's report in ``folder``; a file that is not one is skipped."""
    out = []
    for path in sorted(folder.glob(f"{_PREFIX}*.json")):
        try:
            data = json.loads(path.read_text("utf-8"))
            out.append(
                GuardReport(int(data["pid"]), str(data["manifest_digest"]), str(data["executable"]))
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out
