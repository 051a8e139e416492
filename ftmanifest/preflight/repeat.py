"""The first steps run twice, each in a fresh process, and compared.

Layer: judging rooms - edge (torch, imported inside the functions; the comparison itself
is pure).  ``first_steps`` builds the model with the recipe's own ``build_model`` (the
default applies the manifest's seeds once the base is loaded, as ``load_pinned`` does,
so a LoRA draws its initial weights from them), runs ``STEPS`` optimizer steps on the
first examples, and returns each step's loss, a digest of the trainable weights after
them and the operations torch named as non-deterministic on the way.  ``repeat_child``
runs it in a new process whose random generators were first set from the operating
system (``scramble``): only what the manifest's seeds govern can come out the same
twice.  ``compare`` says where two runs part: on the CPU bitwise, on CUDA within
``CUDA_TOLERANCE``.

Non-deterministic kernels: unless the manifest's ``seeds.deterministic``
already switched torch's deterministic mode on, the steps run under
``torch.use_deterministic_algorithms(True, warn_only=True)``; torch then uses
a deterministic kernel where it has one and warns, naming the operation,
where it has none.  Those names are reported.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import subprocess
import sys
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

from ftmanifest.errors import RefusedError
from ftmanifest.preflight.steps import micro_batches, pad_id, train_step

STEPS = 3  # LoRA's A matrices move only once B is non-zero: two steps, and one more
# Relative tolerance of each loss and of each trainable tensor's norm and fixed
# projection on CUDA, where kernels without a deterministic version (atomic adds)
# change the last bits of a sum from run to run.  Stated, not measured on a GPU.
CUDA_TOLERANCE = 1e-3
_NAMED = re.compile(r"^(.+?) does not have a deterministic implementation")

CAUSES = [
    "the seeds are applied after the model (and its LoRA) is built: apply them first "
    "(load_pinned applies them once the base is loaded, before get_peft_model)",
    "a seed taken from the clock or the OS (time.time(), random.SystemRandom, "
    "os.urandom): take every seed from the manifest's `seeds`",
    "a non-deterministic kernel: set seeds.deterministic: true "
    "(torch.use_deterministic_algorithms) and CUBLAS_WORKSPACE_CONFIG=:4096:8 on CUDA",
    "the data order: shuffle with ftmanifest.seeding.data_order_generator(manifest)",
]


class NotDeterministicError(RefusedError):
    """The first training steps, run twice in fresh processes, gave different losses or weights."""

    reason = "not-deterministic"


@dataclass
class Run:
    """What one run of the first steps gave."""

    losses: list[float]
    digest: str  # sha256 over the trainable tensors' names, dtypes, shapes and bytes
    tensors: dict[str, list[Any]]  # name -> [sha256 of the bytes, norm, projection]
    kernels: list[str] = field(default_factory=list)  # non-deterministic ops torch named
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tensor_digests(model: Any) -> tuple[str, dict[str, list[Any]]]:
    """The trainable weights' digest (``sha256:``), and per tensor its bytes' digest,
    L2 norm and a projection on a fixed random direction (what a tolerance compares)."""
    import torch

    whole = hashlib.sha256()
    out: dict[str, list[Any]] = {}
    direction = torch.Generator().manual_seed(0)
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        t = p.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        head = f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode()
        whole.update(head + raw)
        wide = t.double().reshape(-1)
        probe = torch.randn(wide.numel(), generator=direction, dtype=torch.float64)
        out[name] = ["sha256:" + hashlib.sha256(raw).hexdigest(), float(wide.norm()),
                     float(wide @ probe)]  # fmt: skip
    return "sha256:" + whole.hexdigest(), out


def first_steps(recipe: Any, device: Any, steps: int = STEPS) -> Run:
    """``steps`` optimizer steps from a freshly built model, as the recipe builds it."""
    import torch

    model = recipe.build_model(recipe).to(device)
    optimizer = recipe.make_optimizer(model, recipe)
    examples = recipe.examples(limit=recipe.micro_batch * recipe.grad_accum)
    batches = micro_batches(examples, recipe.micro_batch, recipe.grad_accum,
                            pad_id(recipe.tokenizer), device)  # fmt: skip
    was_on = torch.are_deterministic_algorithms_enabled()
    was_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    if not was_on:
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            losses = [
                train_step(
                    model, optimizer, batches, recipe.loss_normalization, recipe.precision
                )  # fmt: skip
                for _ in range(steps)
            ]
    finally:
        torch.use_deterministic_algorithms(was_on, warn_only=was_warn)
    digest, tensors = tensor_digests(model)
    return Run(losses, digest, tensors, kernels_named(str(w.message) for w in seen),
               getattr(device, "type", str(device)))  # fmt: skip


def kernels_named(messages: Any) -> list[str]:
    """The operations torch's warn-only deterministic mode named, each once, in order."""
    out: list[str] = []
    for text in messages:
        m = _NAMED.match(text.strip())
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def scramble() -> None:
    """Set python's, numpy's and torch's generators from the OS: what the
    manifest's seeds do not set afterwards differs from one process to the next."""
    import torch

    random.seed(os.urandom(16))
    try:
        import numpy as np

        np.random.seed(int.from_bytes(os.urandom(4), "big"))
    except ImportError:
        pass
    torch.manual_seed(int.from_bytes(os.urandom(8), "big") >> 1)


def run_child(manifest: str, spec: str, device: str, steps: int = STEPS) -> Any:
    """Start ``repeat_child`` (not waited for): its last line on stdout is the ``Run``."""
    argv = [sys.executable, "-m", "ftmanifest.preflight.repeat_child", manifest, spec, device,
            str(steps)]  # fmt: skip
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip


def child_result(proc: Any, timeout: float = 600) -> Run | str:
    """The child's ``Run``, or why there is none (its last line on stderr)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"no answer within {timeout:.0f} s"
    if proc.returncode != 0:
        return (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300]
    try:
        return Run(**json.loads(out.strip().splitlines()[-1]))
    except (ValueError, TypeError, IndexError) as exc:
        return f"unreadable answer: {exc}"


def _close(a: float, b: float, tolerance: float | None) -> bool:
    if tolerance is None:
        return a == b or (math.isnan(a) and math.isnan(b))
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance * 1e-3)


def compare(a: Run, b: Run, tolerance: float | None) -> NotDeterministicError | None:
    """Where two runs part: the first step whose loss differs, else the first
    trainable tensor whose bytes differ (``tolerance`` None) or whose norm or
    projection differs by more than ``tolerance`` (relative)."""
    how = "bitwise" if tolerance is None else f"within relative {tolerance:g}"
    kernels = sorted(set(a.kernels) | set(b.kernels))
    hint = "non-deterministic kernels seen: " + ", ".join(kernels) + "; " if kernels else ""
    hint += "likely causes: " + " | ".join(CAUSES)
    for i, (x, y) in enumerate(zip(a.losses, b.losses, strict=False), start=1):
        if not _close(x, y, tolerance):
            return NotDeterministicError(
                f"the first {len(a.losses)} steps, run twice in fresh processes, differ at "
                f"step {i}: loss {x!r} then {y!r}",
                field=f"step {i} loss", expected=f"equal {how}", observed=f"{x!r} != {y!r}",
                hint=hint,
            )  # fmt: skip
    names = [n for n in a.tensors if n in b.tensors] + sorted(set(a.tensors) ^ set(b.tensors))
    for name in names:
        ta, tb = a.tensors.get(name), b.tensors.get(name)
        if ta is None or tb is None:
            observed = "trained in one run only"
        elif tolerance is None and ta[0] == tb[0]:
            continue
        elif tolerance is not None and all(_close(ta[k], tb[k], tolerance) for k in (1, 2)):
            continue
        else:
            observed = f"norm {ta[1]!r} then {tb[1]!r}"
        return NotDeterministicError(
            f"the first {len(a.losses)} steps, run twice in fresh processes, give the same "
            f"losses but different weights: first {name}",
            field=name, expected=f"equal {how}", observed=observed, hint=hint,
        )  # fmt: skip
    return None
