"""The result table every benchmark prints: one row per measurement, and its exit code.

Each row is (benchmark, ftmanifest, reference, ratio, target, ok).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

HEADER = ("benchmark", "ftmanifest", "reference", "ratio", "target", "ok")


def print_table(rows: Sequence[tuple[str, str, str, str, str, bool | None]], context: str) -> int:
    """Print the rows under a line of context; 0 when every target was met, else 1.
    A row whose verdict is None has a target that does not apply to this run ("-")."""
    table = [HEADER] + [(*r[:5], "-" if r[5] is None else "yes" if r[5] else "NO") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    print(f"cpus: {os.cpu_count()}  python: {sys.version.split()[0]}  {context}")
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0 if all(r[5] is not False for r in rows) else 1


def installed_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """Compile ftmanifest's bytecode once, untimed, as ``pip install`` does, and
    return ``env`` (default: this process's) without PYTHONDONTWRITEBYTECODE.

    An editable install writes no ``.pyc`` files, and where that variable is
    set (as on the development machines) every ``ftmanifest`` process compiled
    its ~60 modules again: 0.8-1.2 s a command, charged to the tool and not to
    the reference it is compared with."""
    import compileall
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "ftmanifest"
    compileall.compile_dir(str(package), quiet=1, workers=0)
    base = dict(os.environ if env is None else env)
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    return base
