"""How many workers hashing may start: CPUs this process may use, and whether
it may fork at all.

Layer: file access (asks the OS, reads no file).
"""

from __future__ import annotations

import os


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # respects taskset/cgroup cpusets
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_workers(n_files: int) -> int:
    """CPUs this process may use, at most one per file, at least one."""
    return max(1, min(_cpus(), n_files))


def _daemonic() -> bool:
    """In a pool's worker process, which may not start processes of its own."""
    import multiprocessing

    return bool(multiprocessing.current_process().daemon)
