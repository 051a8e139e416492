"""Apply a manifest's seeds and determinism flags inside training code.

Layer: probes and runtime (numpy and torch imported inside the functions).
``seed_everything(manifest)`` seeds python's ``random``, numpy (when
installed) and torch (when installed), and sets torch's determinism switches
as the ``seeds`` section declares them.

What a running process cannot change: ``PYTHONHASHSEED`` is read once at
interpreter start, so string hashing (set iteration order) is only fixed if
the variable is set before ``python`` starts (``ftmanifest run`` or the shell
does that).  ``CUBLAS_WORKSPACE_CONFIG`` must be set before the first cuBLAS
call; with ``deterministic: true`` it is set to ``:4096:8`` if unset, which
is what CUDA's documentation asks for deterministic cuBLAS.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import random
from pathlib import Path
from typing import TYPE_CHECKING

from ftmanifest.errors import InputError
from ftmanifest.manifest import LoadedManifest, load_manifest
from ftmanifest.manifest.model import Manifest

if TYPE_CHECKING:
    import torch

    from ftmanifest.manifest import LoadedManifest
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.manifest.training import Seeds

log = logging.getLogger(__name__)

CUBLAS_DEFAULT = ":4096:8"

__all__ = ["seed_everything", "data_order_generator", "CUBLAS_DEFAULT"]


def _manifest(source: LoadedManifest | Manifest | str | Path) -> tuple[Manifest, str | None]:
    if isinstance(source, (str, Path)):
        loaded = load_manifest(source)
        return loaded.manifest, str(loaded.path)
    if isinstance(source, LoadedManifest):
        return source.manifest, str(source.path)
    if isinstance(source, Manifest):
        return source, None
    raise InputError(
        "seed_everything takes a manifest",
        expected="a path, a LoadedManifest or a Manifest",
        observed=type(source).__name__,
    )


def _seed(seeds: Seeds, name: str, path: str | None) -> int:
    value = getattr(seeds, name)
    if value is None:
        raise InputError(
            f"the manifest does not pin seeds.{name}",
            path=path,
            loc=("seeds", name),
            expected="a non-negative integer",
            observed="absent",
            hint=f"add 'seeds: {{{name}: 1234}}' (any fixed integer) to the manifest",
        )
    return int(value)


def seed_everything(
    manifest: LoadedManifest | Manifest | str | Path,
) -> dict[str, int | bool | str | None]:
    """Seed random, numpy and torch and set determinism flags from ``manifest``.

    Returns what was applied, e.g. ``{"python": 1234, "torch": 1234,
    "deterministic": True, ...}``, and logs it at INFO.  A seed the manifest
    leaves out for a library that is installed raises ``InputError`` naming
    the field (``seeds.torch``); numpy's and torch's seeds are only required
    when those libraries are installed.
    """
    model, path = _manifest(manifest)
    seeds = model.seeds
    applied: dict[str, int | bool | str | None] = {}

    value = _seed(seeds, "python", path)
    random.seed(value)
    applied["python"] = value

    if importlib.util.find_spec("numpy") is not None:
        import numpy as np

        value = _seed(seeds, "numpy", path)
        np.random.seed(value)
        applied["numpy"] = value

    if importlib.util.find_spec("torch") is not None:
        applied.update(_seed_torch(seeds, path))

    pyhash = os.environ.get("PYTHONHASHSEED")
    applied["pythonhashseed"] = pyhash  # informational: fixed at interpreter start
    log.info("ftmanifest seeds applied: %s", applied)
    return applied


def _seed_torch(seeds: Seeds, path: str | None) -> dict[str, int | bool | str | None]:
    import torch

    applied: dict[str, int | bool | str | None] = {}
    value = _seed(seeds, "torch", path)
    torch.manual_seed(value)  # seeds the CPU and every CUDA/MPS device generator
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(value)
    applied["torch"] = value
    if seeds.deterministic:
        if "CUBLAS_WORKSPACE_CONFIG" not in os.environ:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_DEFAULT
        applied["CUBLAS_WORKSPACE_CONFIG"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
    # the manifest is the truth in both directions: false switches them off
    torch.use_deterministic_algorithms(seeds.deterministic)
    torch.backends.cudnn.deterministic = seeds.deterministic
    applied["deterministic"] = seeds.deterministic
    torch.backends.cudnn.benchmark = seeds.cudnn_benchmark
    applied["cudnn_benchmark"] = seeds.cudnn_benchmark
    return applied


def data_order_generator(manifest: LoadedManifest | Manifest | str | Path) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded from ``seeds.data_order`` (for DataLoader shuffling)."""
    import torch

    model, path = _manifest(manifest)
    gen = torch.Generator()
    gen.manual_seed(_seed(model.seeds, "data_order", path))
    return gen
