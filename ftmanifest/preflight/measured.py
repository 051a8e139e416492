"""A preflight step's measured peak, compared with the estimate for the shape it ran.

Layer: judging rooms (preflight; pure: a step row's figures and an
``Architecture`` in, ``estimate.Measured`` out, and ``allocator_here`` reads
the environment).  Preflight pads its step to ``seq_len`` and records the
shape it ran (``measured_shape``) and the allocator it ran under; the
estimate for exactly that shape and allocator is what the measurement is set
beside (a step padded to the longest example, 36 tokens, was
compared with the estimate for 512, an error of +165% to +284% that said
nothing about the estimate).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ftmanifest.preflight.estimate import Measured, Setup, estimate, host_allocator
from ftmanifest.preflight.shapes import Architecture

OLD_RECORD = (
    "the preflight record does not say the shape its step ran (older preflights padded "
    "to the longest example, not to seq_len); measure again: ftmanifest preflight M --only step"
)


def allocator_here(backend: str | None) -> str:
    """The allocator a step on ``backend`` sees on this machine (``host_allocator``)."""
    return host_allocator(os.environ, backend, platform.libc_ver()[0])


def compare_measured(arch: Architecture, setup: Setup, figures: Mapping[str, Any]) -> Measured:
    """The step row's measured peak beside the estimate for the shape it ran:
    the device allocator's peak, else the host's rise during the step plus the
    weights (resident before it)."""
    shape = figures.get("measured_shape")
    if not isinstance(shape, Mapping) or not all(
        isinstance(shape.get(k), int) and shape[k] > 0 for k in ("seq_len", "micro_batch")
    ):
        return Measured(None, None, why_not=OLD_RECORD)
    device = figures.get("peak_device_bytes")
    allocator = "device" if isinstance(device, int) else str(figures.get("allocator") or "exact")
    shaped = replace(
        setup, seq_len=shape["seq_len"], micro_batch=shape["micro_batch"], allocator=allocator
    )
    est = estimate(arch, shaped)
    if isinstance(device, int):
        measured: int | None = device
    else:
        peak, before = figures.get("peak_host_bytes"), figures.get("host_bytes_before")
        ok = isinstance(peak, int) and isinstance(before, int)
        measured = max(peak - before, 0) + _weights(est) if ok else None  # type: ignore[operator]
    return Measured(
        measured,
        est.total if measured is not None else None,
        seq_len=shaped.seq_len,
        micro_batch=shaped.micro_batch,
        allocator=allocator,
        why_not=None if measured is not None else "the step row has no memory figures",
    )


def _weights(est: Any) -> int:
    return sum(p.bytes for p in est.parts if p.name.endswith("weights"))
