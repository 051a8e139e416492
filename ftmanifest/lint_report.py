"""Print a lint run and choose its exit code.

Layer: pure core (it writes to stdout/stderr and decides the exit code), shared by
``ftmanifest lint`` and the pre-commit hook script; ``output`` only renders.
"""

from __future__ import annotations

import sys

from ftmanifest.errors import EXIT_INPUT, EXIT_OK, EXIT_REFUSED
from ftmanifest.output import note, render_findings

TYPE_CHECKING = False  # no runtime `typing` on the pre-commit path (see findings.py)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ftmanifest.findings import Finding


def lint_report(findings: Sequence[Finding], unusable: int, files: int, fmt: str) -> int:
    """Print a lint run (findings on stdout, a summary on stderr); return its exit code.

    Warnings (a variant whose parent is nowhere to be found: FTM081) are shown
    but do not fail the run."""
    sys.stdout.write(render_findings(findings, fmt, files=files, unusable=unusable))
    errors = [f for f in findings if f.severity == "error"]
    if fmt == "text":
        bad = len({f.path for f in errors})
        warned = len(findings) - len(errors)
        also = f", {warned} warning(s)" if warned else ""
        note(
            f"{len(errors)} problem(s) in {bad} of {files} manifest(s){also}"
            if errors
            else f"{files} manifest(s) pinned, no problems{also}"
        )
    if unusable:
        return EXIT_INPUT
    return EXIT_REFUSED if errors else EXIT_OK
