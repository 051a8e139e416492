"""One training step as the manifest sizes it, and the memory it took.

Layer: judging rooms - edge (torch).  ``micro_batches`` cuts the formatted examples into
``grad_accum`` micro-batches of ``micro_batch`` sequences (padded to the
longest, or to ``pad_to``: the step check pads to ``seq_len`` so it measures
the shape the manifest sizes; padding carries no loss); ``train_step`` runs forward and backward
on each, normalising the loss as ``training.loss_normalization`` says
(``per-token``: the summed token losses over every loss-carrying token of the
whole step; ``per-sequence``: the mean over sequences of each sequence's mean),
then one optimizer step.  ``PeakMemory`` reads the host's peak resident set
(Linux: reset through ``/proc/self/clear_refs``, read from ``VmHWM``) and the
device allocator's peak (CUDA).
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Sequence
from typing import Any

from ftmanifest.preflight.recipe import IGNORE, Example


def pad_id(tokenizer: Any) -> int:
    """The id batches are padded with: the tokenizer's pad token, else EOS, else UNK, else 0."""
    for attr in ("pad_token_id", "eos_token_id", "unk_token_id"):
        value = getattr(tokenizer, attr, None)
        if value is not None:
            return int(value)
    return 0


def micro_batches(
    examples: Sequence[Example],
    micro_batch: int,
    grad_accum: int,
    pad_id: int,
    device: Any,
    pad_to: int | None = None,
) -> list[dict[str, Any]]:
    import torch

    need = micro_batch * grad_accum
    if not examples:
        return []
    chosen = [examples[i % len(examples)] for i in range(need)]
    out = []
    for start in range(0, need, micro_batch):
        group = chosen[start : start + micro_batch]
        width = max([len(e.input_ids) for e in group] + [pad_to or 0])
        ids = [e.input_ids + [pad_id] * (width - len(e.input_ids)) for e in group]
        labels = [e.labels + [IGNORE] * (width - len(e.labels)) for e in group]
        mask = [[1] * len(e.input_ids) + [0] * (width - len(e.input_ids)) for e in group]
        out.append({
            "input_ids": torch.tensor(ids, device=device),
            "labels": torch.tensor(labels, device=device),
            "attention_mask": torch.tensor(mask, device=device),
        })  # fmt: skip
    return out


def _token_losses(model: Any, batch: dict[str, Any]) -> tuple[Any, Any]:
    """(per-position loss, mask of loss-carrying positions), shifted for a causal LM."""
    import torch

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    shift_logits = logits[:, :-1, :].float()
    shift_labels = batch["labels"][:, 1:]
    losses = torch.nn.functional.cross_entropy(
        shift_logits.reshape(-1, shift_logits.size(-1)),
        shift_labels.reshape(-1),
        ignore_index=IGNORE,
        reduction="none",
    ).view(shift_labels.shape)
    return losses, shift_labels != IGNORE


def autocast(device: Any, precision: str) -> Any:
    """The manifest's compute precision: bf16/fp16 autocast, else nothing."""
    import contextlib

    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    kind = getattr(device, "type", "cpu")
    if dtype is None or (dtype is torch.float16 and kind == "cpu"):
        return contextlib.nullcontext()
    return torch.autocast(device_type=kind, dtype=dtype)


def train_step(
    model: Any,
    optimizer: Any,
    batches: Sequence[dict[str, Any]],
    normalization: str,
    precision: str = "fp32",
) -> float:
    """One optimizer step over ``batches``; returns the step's loss."""
    import torch

    model.train()
    optimizer.zero_grad(set_to_none=True)
    total_tokens = sum(int((b["labels"][:, 1:] != IGNORE).sum()) for b in batches)
    sequences = sum(int(b["labels"].size(0)) for b in batches)
    step_loss = 0.0
    device = batches[0]["input_ids"].device if batches else None
    for b in batches:
        with autocast(device, precision):
            losses, mask = _token_losses(model, b)
        if normalization == "per-sequence":
            per_seq = (losses * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
            loss = per_seq.sum() / max(sequences, 1)
        else:
            loss = (losses * mask).sum() / max(total_tokens, 1)
        loss.backward()
        step_loss += float(loss.detach())
    optimizer.step()
    if not torch.isfinite(torch.tensor(step_loss)):
        return float("nan")
    return step_loss


def eval_loss(model: Any, batches: Sequence[dict[str, Any]]) -> float:
    import torch

    model.eval()
    with torch.no_grad():
        total, count = 0.0, 0
        for b in batches:
            losses, mask = _token_losses(model, b)
            total += float((losses * mask).sum())
            count += int(mask.sum())
    return total / max(count, 1)


class PeakMemory:
    """Peak host RSS and device memory over a ``with`` block, in bytes."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.host: int | None = None
        self.device_peak: int | None = None
        self.host_before = 0
        self.method = "VmHWM after clear_refs" if _can_reset() else "ru_maxrss (process peak)"

    def __enter__(self) -> PeakMemory:
        import torch

        if _can_reset():
            _reset_peak()
        self.host_before = _rss()
        if getattr(self.device, "type", "cpu") == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        return self

    def __exit__(self, *exc: object) -> None:
        import torch

        self.host = _peak()
        if getattr(self.device, "type", "cpu") == "cuda":
            self.device_peak = int(torch.cuda.max_memory_allocated(self.device))


def _can_reset() -> bool:
    return sys.platform.startswith("linux") and os.access("/proc/self/clear_refs", os.W_OK)


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _rss() -> int:
    return _status("VmRSS") or 0


def _peak() -> int:
    peak = _status("VmHWM")
    if peak is not None:
        return peak
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return usage if sys.platform == "darwin" else usage * 1024
