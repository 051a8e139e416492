"""Which accelerator stack this machine would train on, decided from the probes.

Layer: probes and runtime - probe (pure).  Table-tested: every input is a plain value.

  cuda  torch built with CUDA and an NVIDIA driver seen
  rocm  torch built with HIP and an AMD driver seen
  mps   torch installed, macOS on arm64
  cpu   everything else (no torch, a CUDA build without a driver, ...)

A build without its driver trains on the CPU, so it is recorded as cpu: the
manifest must say what runs, not what was installed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftmanifest.probe.devices import DeviceGroup, GpuObservation
from ftmanifest.probe.mps import MpsInfo, is_apple_silicon
from ftmanifest.probe.torchinfo import TorchBuild

BackendKind = str  # one of "cuda", "rocm", "mps", "cpu" (manifest.environment.BackendKind)


def decide_kind(
    *,
    torch_installed: bool,
    torch_cuda: str | None,
    torch_hip: str | None,
    nvidia_seen: bool,
    amd_seen: bool,
    system: str,
    machine: str,
) -> BackendKind:
    """Pure decision of the backend kind (see the module docstring)."""
    if not torch_installed:
        return "cpu"
    if torch_cuda and nvidia_seen:
        return "cuda"
    if torch_hip and amd_seen:
        return "rocm"
    if is_apple_silicon(system, machine):
        return "mps"
    return "cpu"


@dataclass(frozen=True)
class BackendObservation:
    kind: BackendKind
    runtime: str | None = None
    dnn: str | None = None
    collectives: str | None = None
    driver: str | None = None
    devices: tuple[DeviceGroup, ...] = ()


def decide(
    torch: TorchBuild | None,
    nvidia: GpuObservation,
    rocm: GpuObservation,
    mps: MpsInfo,
    system: str,
    machine: str,
) -> BackendObservation:
    """Pure: the backend section from the probes' results."""
    kind = decide_kind(
        torch_installed=torch is not None,
        torch_cuda=torch.cuda if torch else None,
        torch_hip=torch.hip if torch else None,
        nvidia_seen=nvidia.seen,
        amd_seen=rocm.seen,
        system=system,
        machine=machine,
    )
    if kind == "cuda" and torch is not None:
        return BackendObservation(
            kind, torch.cuda, torch.cudnn, torch.nccl, nvidia.driver, nvidia.devices
        )
    if kind == "rocm" and torch is not None:
        # MIOpen and RCCL are bundled inside ROCm wheels; their versions are
        # not readable without importing torch, so they stay unknown here.
        return BackendObservation(kind, torch.hip, None, None, rocm.driver, rocm.devices)
    if kind == "mps":
        return BackendObservation(kind, runtime=mps.macos)
    return BackendObservation("cpu")
