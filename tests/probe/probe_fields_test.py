"""to_environment_fields: observation -> the manifest's environment section."""

from __future__ import annotations

import pytest

from ftmanifest.manifest.environment import Environment
from ftmanifest.probe import Observation
from ftmanifest.probe.backend import BackendObservation
from ftmanifest.probe.devices import DeviceGroup, GpuObservation
from ftmanifest.probe.fields import missing_packages, package_pins, to_environment_fields
from ftmanifest.probe.git import GitState
from ftmanifest.probe.mps import MpsInfo
from ftmanifest.probe.system import SystemInfo
from ftmanifest.probe.torchinfo import TorchBuild

COMMIT = "a" * 40
PACKAGES = {
    "torch": "2.5.1+cu124",
    "transformers": "4.46.3",
    "peft": "0.13.2",
    "nvidia-cudnn-cu12": "9.1.0.70",
}
H100 = (DeviceGroup("NVIDIA H100 80GB HBM3", "9.0", 81559, 8),)


def _observation(git: GitState | None, backend: BackendObservation) -> Observation:
    return Observation(
        system=SystemInfo(
            "3.11.7",
            "3.11.7 (main)",
            "CPython",
            "Linux",
            "6.8.0",
            "x86_64",
            "glibc 2.35",
            None,
            "AMD EPYC 9654",
            384,
        ),
        packages=PACKAGES,
        torch=TorchBuild("2.5.1+cu124", "12.4", None, None, False, "9.1.0.70", "2.21.5", None),
        nvidia=GpuObservation(True, "nvidia-smi", "565.57.01", H100, "12.7"),
        rocm=GpuObservation(False),
        mps=MpsInfo(False, None, None),
        env_vars={"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        git=git,
        backend=backend,
    )


CUDA = BackendObservation("cuda", "12.4", "9.1.0.70", "2.21.5", "565.57.01", H100)


def test_cuda_machine_fills_every_field_and_validates():
    fields = to_environment_fields(
        _observation(GitState("ok", COMMIT, True), CUDA), ["torch", "Transformers", "PEFT"]
    )
    assert fields == {
        "python": "3.11.7",
        "packages": {"peft": "==0.13.2", "torch": "==2.5.1+cu124", "transformers": "==4.46.3"},
        "backend": {
            "kind": "cuda",
            "runtime": "12.4",
            "dnn": "9.1.0.70",
            "collectives": "2.21.5",
            "driver": "565.57.01",
            "devices": [
                {
                    "name": "NVIDIA H100 80GB HBM3",
                    "compute_capability": "9.0",
                    "memory_mib": 81559,
                    "count": 8,
                }
            ],
        },
        "env_vars": {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        "code": {"commit": COMMIT, "dirty": True},
    }
    env = Environment.model_validate(fields)
    assert env.backend.devices[0].count == 8 and env.code.dirty


@pytest.mark.parametrize(
    "git", [None, GitState("not-a-repo"), GitState("no-git"), GitState("no-commits", dirty=True)]
)
def test_code_is_left_out_without_a_commit(git):
    fields = to_environment_fields(_observation(git, BackendObservation("cpu")))
    assert "code" not in fields
    assert fields["packages"] == package_pins(PACKAGES)
    Environment.model_validate(fields)


def test_package_pins_and_missing_names():
    assert package_pins(PACKAGES, ["nvidia_cudnn_cu12", "flash-attn"]) == {
        "nvidia-cudnn-cu12": "==9.1.0.70"
    }
    assert missing_packages(PACKAGES, ["Flash_Attn", "torch"]) == ["flash-attn"]
    assert list(package_pins(PACKAGES)) == sorted(PACKAGES)
