"""Probe: how the installed torch was built, read WITHOUT importing torch.

Layer: probes and runtime - probe (edge).  torch ships ``torch/version.py`` with plain
assignments (__version__, cuda, hip, git_version, debug); it is located through
importlib's finder (which does not run the package) and read with ``ast``.  cuDNN and
NCCL come as their own wheels (nvidia-cudnn-cu12, nvidia-nccl-cu12) on pip installs, so
their versions are read from the distribution list.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from ftmanifest.probe._context import ProbeContext

_CUDNN = re.compile(r"^nvidia-cudnn(-cu\d+)?$")
_NCCL = re.compile(r"^nvidia-nccl(-cu\d+)?$")


@dataclass(frozen=True)
class TorchBuild:
    version: str | None
    """torch.__version__, e.g. 2.13.0+cu128."""
    cuda: str | None
    """CUDA runtime torch was built with, e.g. 12.8; None for CPU/ROCm builds."""
    hip: str | None
    """HIP runtime of a ROCm build, e.g. 6.4.43482."""
    git_version: str | None
    debug: bool | None
    cudnn: str | None
    nccl: str | None
    version_file: str | None
    """Where version.py was read from."""


def parse_version_source(source: str) -> dict[str, object]:
    """Top-level constant assignments of a version.py (plain or annotated)."""
    values: dict[str, object] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            constant = ast.literal_eval(value)
        except ValueError:
            continue  # computed values are not build facts
        for target in targets:
            if isinstance(target, ast.Name):
                values[target.id] = constant
    return values


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def dist_version(packages: dict[str, str], pattern: re.Pattern[str]) -> str | None:
    """Version of the first distribution whose normalised name matches ``pattern``."""
    for name in sorted(packages):
        if pattern.match(name):
            return packages[name]
    return None


def build_from_source(
    source: str, packages: dict[str, str], version_file: str | None = None
) -> TorchBuild:
    """Pure: a TorchBuild from version.py text and the distribution list."""
    values = parse_version_source(source)
    debug = values.get("debug")
    return TorchBuild(
        version=_str(values.get("__version__")),
        cuda=_str(values.get("cuda")),
        hip=_str(values.get("hip")),
        git_version=_str(values.get("git_version")),
        debug=debug if isinstance(debug, bool) else None,
        # A future version.py may carry these fields; the wheels are the fallback.
        cudnn=_str(values.get("cudnn")) or dist_version(packages, _CUDNN),
        nccl=_str(values.get("nccl")) or dist_version(packages, _NCCL),
        version_file=version_file,
    )


def find_version_file() -> Path | None:
    """torch/version.py of the torch that ``import torch`` would load, unimported."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "version.py"
        if candidate.is_file():
            return candidate
    return None


def probe(ctx: ProbeContext) -> TorchBuild | None:
    """None when torch is not installed."""
    path = find_version_file()
    if path is None:
        return None
    try:
        source = path.read_text(encoding="utf-8")
        return build_from_source(source, ctx.packages, str(path))
    except (OSError, SyntaxError, ValueError):
        version = ctx.packages.get("torch")
        return TorchBuild(version, None, None, None, None, None, None, str(path))
