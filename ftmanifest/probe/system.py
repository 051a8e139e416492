"""Probe: the Python interpreter, the operating system and the CPU.

Layer: probes and runtime - probe (edge).  The parser of /proc/cpuinfo is pure and
tested alone.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass

from ftmanifest.probe._context import ProbeContext


@dataclass(frozen=True)
class SystemInfo:
    python: str
    """Exact version, e.g. 3.11.7 (platform.python_version())."""
    python_full: str
    """sys.version, with the build and compiler."""
    implementation: str
    """CPython, PyPy, ..."""
    system: str
    """Linux, Darwin, Windows."""
    release: str
    """Kernel release (Linux) or Darwin release."""
    machine: str
    """x86_64, arm64, aarch64."""
    libc: str | None
    """glibc 2.36 / musl, where known."""
    mac_version: str | None
    """macOS product version (14.4.1) on Darwin."""
    cpu_model: str | None
    logical_cores: int | None


def parse_cpu_model(cpuinfo: str) -> str | None:
    """The CPU model name from /proc/cpuinfo text (x86 'model name', Arm 'Model'...)."""
    keys = ("model name", "hardware", "cpu model", "model", "processor")
    found: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if sep and value and key in keys and key not in found:
            found[key] = value
    for key in keys:
        name = found.get(key)
        # 'processor' and 'model' are plain numbers on x86; only a name is useful.
        if name and not name.isdigit():
            return name
    return None


def libc_version() -> str | None:
    try:  # instant on glibc; platform.libc_ver() scans the interpreter binary
        gnu = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        gnu = None
    if gnu:
        return gnu
    name, version = platform.libc_ver()
    if not name:
        return None
    return f"{name} {version}".strip()


def probe(ctx: ProbeContext) -> SystemInfo:
    cpuinfo = ctx.read_text("/proc/cpuinfo")
    mac = platform.mac_ver()[0] or None
    return SystemInfo(
        python=platform.python_version(),
        python_full=sys.version,
        implementation=platform.python_implementation(),
        system=platform.system(),
        release=platform.release(),
        machine=platform.machine(),
        libc=libc_version() if sys.platform.startswith("linux") else None,
        mac_version=mac,
        cpu_model=parse_cpu_model(cpuinfo) if cpuinfo else (platform.processor() or None),
        logical_cores=os.cpu_count(),
    )
