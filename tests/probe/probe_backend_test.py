"""The backend decision and the MPS branches, as pure table cases."""

from __future__ import annotations

import pytest

from ftmanifest.probe import backend, mps
from ftmanifest.probe.devices import DeviceGroup, GpuObservation
from ftmanifest.probe.torchinfo import TorchBuild

LINUX, MAC = ("Linux", "x86_64"), ("Darwin", "arm64")


@pytest.mark.parametrize(
    ("torch", "cuda", "hip", "nvidia", "amd", "platform", "kind"),
    [
        (True, "12.4", None, True, False, LINUX, "cuda"),
        (True, "12.4", None, False, False, LINUX, "cpu"),  # CUDA build, no driver
        (True, None, None, True, False, LINUX, "cpu"),  # CPU build on a GPU box
        (True, None, "6.2.41133", False, True, LINUX, "rocm"),
        (True, None, "6.2.41133", False, False, LINUX, "cpu"),  # ROCm build, no AMD driver
        (True, None, "6.2.41133", True, False, LINUX, "cpu"),  # ROCm build, NVIDIA box
        (True, "12.4", None, False, True, LINUX, "cpu"),  # CUDA build, AMD box
        (False, None, None, True, True, LINUX, "cpu"),  # no torch at all
        (True, None, None, False, False, MAC, "mps"),
        (False, None, None, False, False, MAC, "cpu"),  # MLX alone is not torch's MPS
        (True, None, None, False, False, ("Darwin", "x86_64"), "cpu"),  # Intel Mac
        (True, None, None, False, False, ("Linux", "aarch64"), "cpu"),  # Arm Linux
    ],
)
def test_decide_kind(torch, cuda, hip, nvidia, amd, platform, kind):
    assert (
        backend.decide_kind(
            torch_installed=torch,
            torch_cuda=cuda,
            torch_hip=hip,
            nvidia_seen=nvidia,
            amd_seen=amd,
            system=platform[0],
            machine=platform[1],
        )
        == kind
    )


@pytest.mark.parametrize(
    ("system", "machine", "mac", "available", "macos"),
    [
        ("Darwin", "arm64", "14.4.1", True, "14.4.1"),
        ("Darwin", "x86_64", "13.6", False, None),
        ("Linux", "aarch64", "", False, None),
        ("Darwin", "arm64", "", True, None),
    ],
)
def test_mps_decision(system, machine, mac, available, macos):
    info = mps.decide(system, machine, mac, {"mlx": "0.26.1"})
    assert (info.available, info.macos, info.mlx) == (available, macos, "0.26.1")


def test_mlx_absent():
    assert mps.decide("Darwin", "arm64", "15.0", {}).mlx is None


def _torch(cuda=None, hip=None):
    return TorchBuild(
        "2.5.1",
        cuda,
        hip,
        None,
        False,
        "9.1.0.70" if cuda else None,
        "2.21.5" if cuda else None,
        None,
    )


H100 = (DeviceGroup("NVIDIA H100 80GB HBM3", "9.0", 81559, 8),)
MI300 = (DeviceGroup("AMD Instinct MI300X", "gfx942", 196592, 8),)
NV = GpuObservation(True, "nvidia-smi", "565.57.01", H100, "12.7")
AMD = GpuObservation(True, "amd-smi", "6.16.13", MI300)
NONE = GpuObservation(False)
NO_MPS = mps.MpsInfo(False, None, None)


def test_cuda_section():
    seen = backend.decide(_torch(cuda="12.4"), NV, NONE, NO_MPS, *LINUX)
    assert seen == backend.BackendObservation(
        "cuda", "12.4", "9.1.0.70", "2.21.5", "565.57.01", H100
    )


def test_rocm_section():
    seen = backend.decide(_torch(hip="6.2.41133-dd7f95766"), NONE, AMD, NO_MPS, *LINUX)
    assert seen == backend.BackendObservation(
        "rocm", "6.2.41133-dd7f95766", None, None, "6.16.13", MI300
    )


def test_mps_section_on_a_mac():
    info = mps.decide("Darwin", "arm64", "14.4.1", {})
    seen = backend.decide(_torch(), NONE, NONE, info, *MAC)
    assert seen == backend.BackendObservation("mps", runtime="14.4.1")


def test_cpu_section_drops_devices_that_are_not_used():
    seen = backend.decide(_torch(), NV, NONE, NO_MPS, *LINUX)
    assert seen == backend.BackendObservation("cpu")
