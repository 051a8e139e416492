"""Probes: what is here (python, OS, CPU, packages, torch build, GPUs, env, git).

Layer: probes and runtime.  Each probe is one short module with a function
``probe(ctx) -> result``; they are registered in :data:`REGISTRY` (STYLE.md
habit 9).  :func:`probe_all` runs every probe and decides the backend;
:func:`run_probe` runs one alone.  Probes never raise for a missing tool: a
missing nvidia-smi is recorded as "no NVIDIA driver seen".  No probe imports
torch, transformers or peft.

Use :func:`ftmanifest.probe.fields.to_environment_fields` to turn an
:class:`Observation` into the manifest's ``environment`` section.
"""

from __future__ import annotations

import contextvars
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ftmanifest.errors import UsageError
from ftmanifest.probe import envvars, git, mps, nvidia, packages, rocm, system, torchinfo
from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe._git_env import git_context, own_repository, run_git
from ftmanifest.probe.backend import BackendObservation, decide
from ftmanifest.probe.devices import GpuObservation
from ftmanifest.probe.fields import to_environment_fields
from ftmanifest.probe.git import GitState
from ftmanifest.probe.mps import MpsInfo
from ftmanifest.probe.system import SystemInfo
from ftmanifest.probe.torchinfo import TorchBuild

__all__ = [
    "REGISTRY",
    "Observation",
    "Probe",
    "ProbeContext",
    "git_context",
    "own_repository",
    "probe_all",
    "run_git",
    "run_probe",
    "to_environment_fields",
]


class Probe(Protocol):
    """A probe looks at one aspect of the machine and returns plain data."""

    def __call__(self, ctx: ProbeContext) -> Any: ...


REGISTRY: dict[str, Probe] = {
    "system": system.probe,
    "packages": packages.probe,
    "torch": torchinfo.probe,
    "nvidia": nvidia.probe,
    "rocm": rocm.probe,
    "mps": mps.probe,
    "env_vars": envvars.probe,
    "git": git.probe,
}
# Probes that wait on external tools; probe_all runs them side by side.
_SLOW = ("nvidia", "rocm", "git")


@dataclass(frozen=True)
class Observation:
    """Everything the probes saw, plus the backend decided from it."""

    system: SystemInfo
    packages: dict[str, str]
    torch: TorchBuild | None
    nvidia: GpuObservation
    rocm: GpuObservation
    mps: MpsInfo
    env_vars: dict[str, str]
    git: GitState | None
    backend: BackendObservation
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_probe(name: str, root: Path | None = None, ctx: ProbeContext | None = None) -> Any:
    """Run one registered probe alone."""
    probe = REGISTRY.get(name)
    if probe is None:
        raise UsageError(
            f"unknown probe {name!r}",
            field="probe",
            expected=", ".join(REGISTRY),
            observed=name,
        )
    return probe(ctx or ProbeContext(root=root))


def probe_all(root: Path | None = None, ctx: ProbeContext | None = None) -> Observation:
    """Run every probe; ``root`` is the training code's folder for the git probe."""
    started = time.perf_counter()
    ctx = ctx or ProbeContext(root=root)
    _ = ctx.packages  # read once, before the threads share it
    with ThreadPoolExecutor(max_workers=len(_SLOW)) as pool:
        # each in a copy of this context: the run's shared answers (git.one_observation)
        slow = {
            name: pool.submit(contextvars.copy_context().run, REGISTRY[name], ctx) for name in _SLOW
        }
        results = {name: REGISTRY[name](ctx) for name in REGISTRY if name not in _SLOW}
        results.update({name: future.result() for name, future in slow.items()})
    sysinfo: SystemInfo = results["system"]
    backend = decide(
        results["torch"],
        results["nvidia"],
        results["rocm"],
        results["mps"],
        sysinfo.system,
        sysinfo.machine,
    )
    return Observation(
        system=sysinfo,
        packages=results["packages"],
        torch=results["torch"],
        nvidia=results["nvidia"],
        rocm=results["rocm"],
        mps=results["mps"],
        env_vars=results["env_vars"],
        git=results["git"],
        backend=backend,
        elapsed_s=time.perf_counter() - started,
    )
