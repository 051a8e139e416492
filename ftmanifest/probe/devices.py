"""Accelerator records shared by the NVIDIA and AMD probes, and their grouping.

Layer: probes and runtime - probe (pure).  A manifest lists each kind of device once
with a count (``Device(name, compute_capability, memory_mib, count)``), so eight
identical H100s are one row with count 8.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuDevice:
    """One accelerator as the vendor tool reported it."""

    name: str
    compute_capability: str | None = None
    """CUDA compute capability (9.0) or gfx target (gfx942)."""
    memory_mib: int | None = None


@dataclass(frozen=True)
class DeviceGroup:
    name: str
    compute_capability: str | None
    memory_mib: int | None
    count: int

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "compute_capability": self.compute_capability,
            "memory_mib": self.memory_mib,
            "count": self.count,
        }


@dataclass(frozen=True)
class GpuObservation:
    """What one vendor's probe saw."""

    seen: bool
    """A driver or a device of this vendor was seen."""
    tool: str | None = None
    """Which source answered: nvidia-smi, nvml, rocm-smi, amd-smi, /proc..."""
    driver: str | None = None
    devices: tuple[DeviceGroup, ...] = ()
    api_version: str | None = None
    """Highest CUDA version the driver supports (nvidia-smi header), if shown."""
    note: str | None = None
    """Why nothing (or only part) was seen: 'nvidia-smi not found on PATH'."""


def group_devices(devices: Iterable[GpuDevice]) -> tuple[DeviceGroup, ...]:
    """Identical devices become one group; order of first appearance is kept."""
    counts: dict[GpuDevice, int] = {}
    for device in devices:
        counts[device] = counts.get(device, 0) + 1
    return tuple(
        DeviceGroup(d.name, d.compute_capability, d.memory_mib, n) for d, n in counts.items()
    )


def parse_int(text: object) -> int | None:
    """An integer from '46068', '46068 MiB' or 46068; None for '[N/A]' and the like."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return text
    if not isinstance(text, str):
        return None
    head = text.strip().split(" ")[0]
    return int(head) if head.isdigit() else None
