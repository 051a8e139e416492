"""Probe: Apple Silicon (Metal / MPS) and MLX.

Layer: probes and runtime - probe (edge) over pure decisions.  MPS exists only on macOS
on arm64; its "runtime" on record is the macOS version, since Metal ships with the OS.
The decision is a pure function so its macOS branches run in tests on Linux.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftmanifest.probe._context import ProbeContext


@dataclass(frozen=True)
class MpsInfo:
    available: bool
    """Apple Silicon under macOS (the platform has Metal)."""
    macos: str | None
    """macOS version, the MPS runtime on record."""
    mlx: str | None
    """Installed MLX version, if any."""


def is_apple_silicon(system: str, machine: str) -> bool:
    return system == "Darwin" and machine.lower() in ("arm64", "aarch64")


def decide(system: str, machine: str, mac_version: str | None, packages: dict[str, str]) -> MpsInfo:
    """Pure: what this platform offers for MPS, from platform facts."""
    apple = is_apple_silicon(system, machine)
    return MpsInfo(
        available=apple,
        macos=(mac_version or None) if apple else None,
        mlx=packages.get("mlx"),
    )


def probe(ctx: ProbeContext) -> MpsInfo:
    import platform

    return decide(platform.system(), platform.machine(), platform.mac_ver()[0], ctx.packages)
