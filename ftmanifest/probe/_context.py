"""What every probe is given: the folder of the training code, the environment,
and the installed distributions (read once, shared).

Layer: probes and runtime - probe (edge).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ftmanifest.probe._command import DEFAULT_TIMEOUT_S, CommandResult, run_command
from ftmanifest.probe.packages import installed_distributions


@dataclass
class ProbeContext:
    """Inputs shared by the probes of one run."""

    root: Path | None = None
    """Folder of the training code (for the git probe); None skips it."""
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout: float = DEFAULT_TIMEOUT_S
    proc_root: Path = Path("/")
    """Where /proc, /sys and /dev are read from (a test may point it elsewhere)."""
    nvml: bool = True
    """Ask NVML (pynvml, only if already installed) when nvidia-smi is missing."""
    use_cache: bool = True
    """The git probe may take a file's blob id from the stat cache (``--no-cache``: False)."""
    digest_judged: tuple[str, ...] = ()
    """Absolute files and folders a manifest judges by their own digests (its data,
    weights, pinned files): the git probe does not read their tracked files again."""

    def run(self, argv: Sequence[str], *, cwd: str | None = None) -> CommandResult:
        return run_command(argv, environ=self.environ, timeout=self.timeout, cwd=cwd)

    def read_text(self, path: str) -> str | None:
        """Read a system file under ``proc_root``; None when absent or unreadable."""
        try:
            return (self.proc_root / path.lstrip("/")).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def exists(self, path: str) -> bool:
        return (self.proc_root / path.lstrip("/")).exists()

    @cached_property
    def packages(self) -> dict[str, str]:
        return installed_distributions()
