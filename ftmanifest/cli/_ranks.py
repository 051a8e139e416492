"""Running one command's body on every rank of a torchrun job, and leaving together.

Layer: commands - edge (cli).  ``in_job`` joins the job, runs the command's body (which
prints what this rank prints and returns its exit code), prints an error the
body raised as the CLI prints any error, then holds the rank until every rank
got there (``distributed.agree.leave_together``), so each exits with the job's
code: torchrun's agent SIGTERMs a node's slower ranks once one rank exits 1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.distributed.agree import leave_together
from ftmanifest.distributed.comm import joined
from ftmanifest.errors import FtManifestError
from ftmanifest.output import error_text, terminal_width
from ftmanifest.untrusted import read_untrusted

if TYPE_CHECKING:
    from ftmanifest.distributed.comm import Comm, Job


def print_error(exc: FtManifestError, fmt: str = "text") -> None:
    """An error as ``cli.main`` prints it."""
    if fmt == "json":
        sys.stdout.write(json.dumps({"error": exc.to_dict()}, indent=2) + "\n")
        return

    sys.stderr.write(f"ftmanifest: error: {error_text(exc, width=terminal_width(sys.stderr))}\n")


def in_job(job: Job, timeout: float, body: Callable[[Comm], int], fmt: str = "text") -> int:
    """``body(comm)`` on this rank of the job; the job's exit code, the same on every rank."""

    with joined(job, timeout) as comm:
        try:
            code = body(comm)
        except FtManifestError as exc:  # every rank still reaches the others' exit
            print_error(exc, fmt)
            code = exc.exit_code
        return leave_together(comm, code)


BY_CONTENT = ("trust", "baseline")  # files each node reads its own copy of


def deciding(args: Any, names: Sequence[str]) -> dict[str, Any]:
    """The arguments among ``names`` that decide the verdict, as ranks compare them:
    ``--accept`` with its reasons, flags, paths as given, and ``--trust`` by what the
    file holds (its digest), since each node reads its own copy."""
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(args, name, None)
        if name == "accept":
            value = sorted(zip(args.accept or [], args.reason or [], strict=False))
        elif name in BY_CONTENT and value is not None:
            value = _digest_of(Path(value))
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, list | tuple):
            value = sorted(str(v) for v in value)
        out["--" + name.replace("_", "-")] = value
    return out


def _digest_of(path: Path) -> str:
    import hashlib

    try:
        raw = read_untrusted(path, limit=16 << 20, what="trust file", hint="")
        return "sha256:" + hashlib.sha256(raw).hexdigest()
    except (OSError, FtManifestError) as exc:
        return f"unreadable: {getattr(exc, 'message', None) or exc}"
