"""The preflight checks, each one named row: passed or failed, with its figures.

Layer: judging rooms - edge (torch, transformers and peft, imported inside).  The
method's checklist before a long run, on the manifest's own model, data and recipe:

    stack     framework, accelerator and method fit each other and the manifest
    disk      only the pinned revision is cached; free disk covers checkpoints
    tokens    formatted examples per category; loss only where the manifest says;
              no example loses its target to truncation
    step      one forward, backward and optimizer step at the manifest's sizing
              (padded to seq_len); peak host and device memory, the shape and allocator
    update    what should change changed, nothing else did; trainable count
    overfit   a tiny sample's loss falls below a threshold within a step budget
    resume    a checkpoint resumes to the same weights and generation
    determinism  two fresh processes give the same losses and weights
    throughput   sustained tokens per second

This module holds what the checks share (``Row``, ``Options``, ``State``) and the
checks that read the setup and the data without training (stack, disk, tokens);
those that take optimizer steps are ``train_checks``', and ``run.CHECKS`` orders them
all.  A check that cannot run (no model, an import error) is a failed row naming why,
never a pass.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.hfcache import cached_revisions
from ftmanifest.preflight.recipe import IGNORE, Example, Recipe


@dataclass
class Row:
    name: str
    ok: bool
    summary: str
    figures: dict[str, Any] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    reason: str | None = None  # a failed row's stable code (``not-deterministic``), or none

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "ok": self.ok, "summary": self.summary,
               "figures": self.figures, "details": self.details}  # fmt: skip
        return {**out, "reason": self.reason} if self.reason else out


@dataclass
class Options:
    device: str = "cpu"
    per_category: int = 2
    overfit_examples: int = 4
    overfit_steps: int = 60
    overfit_ratio: float = 0.2  # the loss must fall below this share of its start
    overfit_lr: float | None = None  # default: the manifest's optimizer lr, else 1e-2
    checkpoints_kept: int = 3
    throughput_seconds: float = 3.0  # the sustained window, after two warm-up steps
    repeat: bool = True  # determinism: a second fresh process to compare the first with


@dataclass
class State:
    """What the checks share: the recipe, its formatted examples, one model."""

    recipe: Recipe
    options: Options
    examples: list[Example] = field(default_factory=list)
    device: Any = None


Check = Callable[[State], Row]


# -- stack --------------------------------------------------------------------


def stack(s: State) -> Row:
    from importlib.metadata import PackageNotFoundError, version

    import torch

    m = s.recipe.manifest
    figures: dict[str, Any] = {}
    problems: list[str] = []
    for name in ("torch", "transformers", "peft", "tokenizers"):
        try:
            figures[name] = version(name)
        except PackageNotFoundError:
            figures[name] = None
            if name != "peft" or (m.method is not None and m.method.kind != "full"):
                problems.append(f"{name} is not installed")
        pinned = m.environment.packages.get(name)
        if pinned and figures.get(name) and pinned.lstrip("=") != figures[name]:
            problems.append(f"{name} {figures[name]} here, {pinned} pinned")
    kind = m.environment.backend.kind
    figures["device"] = s.options.device
    if kind in ("cuda", "rocm"):
        ok = torch.cuda.is_available()
        built = torch.version.hip if kind == "rocm" else torch.version.cuda
        figures["runtime"] = built
        if not ok or built is None:
            problems.append(f"backend {kind} pinned, but torch here has no usable {kind}")
    elif kind == "mps" and not torch.backends.mps.is_available():
        problems.append("backend mps pinned, but MPS is not available")
    precision = m.training.precision
    if precision == "bf16":
        supported = torch.cuda.is_bf16_supported() if s.options.device.startswith("cuda") else True
        figures["bf16"] = supported
        if not supported:
            problems.append("bf16 pinned, but this device does not support it")
    if precision == "fp8":
        capability = (
            torch.cuda.get_device_capability(torch.device(s.options.device))
            if s.options.device.startswith("cuda") and torch.cuda.is_available()
            else None
        )
        figures["compute_capability"] = capability
        if capability is None or tuple(capability) < (8, 9):
            problems.append(
                f"fp8 needs a CUDA device with compute capability 8.9 or newer "
                f"(here: {capability or s.options.device})"
            )
    if m.method is not None and m.method.kind == "lora":
        try:
            from peft import LoraConfig

            LoraConfig(r=m.method.r, use_dora=m.method.use_dora)
        except (ImportError, TypeError, ValueError) as exc:
            problems.append(f"peft cannot build this LoRA: {exc}")
        from ftmanifest.adapter.base import manifest_method_findings

        for f in manifest_method_findings(m, s.recipe.manifest_path):
            if f.severity == "error":
                problems.append(f"{f.field}: {f.message} (observed {f.observed})")
    attn = m.environment.attn_implementation
    if attn:
        figures["attention"] = attn
        need = {"flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn_interface"}
        module = need.get(attn)
        if module is not None:
            import importlib.util

            if importlib.util.find_spec(module) is None:
                problems.append(f"attn_implementation {attn} pinned, but {module} is not installed")
    summary = "fits" if not problems else "; ".join(problems)
    return Row("stack", not problems, summary, figures, problems)


# -- disk ---------------------------------------------------------------------


def disk(s: State) -> Row:
    m = s.recipe.manifest
    figures: dict[str, Any] = {}
    details: list[str] = []
    ok = True
    if m.model.repo and m.model.revision:
        cached = cached_revisions(m.model.repo)
        others = [r for r in cached if r[0] != m.model.revision]
        figures["pinned_snapshot_cached"] = any(r[0] == m.model.revision for r in cached)
        figures["other_snapshots"] = [{"commit": c, "bytes": b} for c, b in others]
        for commit, size in others:
            details.append(f"other cached snapshot {commit[:12]} ({size / 2**20:.1f} MiB)")
        if others:
            ok = False
    params = _param_bytes(s.recipe.model_folder)
    method = m.method
    if method is not None and method.kind == "lora":
        checkpoint = max(params // 50, 1 << 20)  # adapter + optimizer state: a rough share
    else:
        checkpoint = params * 3  # weights + two AdamW states
    need = checkpoint * s.options.checkpoints_kept
    need += need // 5  # logs, evaluation outputs and retries
    if m.experiment.budget.disk_gib:
        need = max(need, int(m.experiment.budget.disk_gib * 2**30))
    where = s.recipe.manifest_path.parent
    free = shutil.disk_usage(where).free
    figures.update(checkpoint_bytes=checkpoint, kept=s.options.checkpoints_kept,
                   need_bytes=need, free_bytes=free)  # fmt: skip
    if free < need:
        ok = False
        details.append(f"free {free / 2**30:.2f} GiB < needed {need / 2**30:.2f} GiB")
    summary = "pinned revision only; disk suffices" if ok else "; ".join(details)
    return Row("disk", ok, summary, figures, details)


def _param_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors")) or sum(
        p.stat().st_size for p in folder.glob("*.bin")
    )


# -- tokens -------------------------------------------------------------------


def tokens(s: State) -> Row:
    r = s.recipe
    per: dict[str, int] = {}
    shown: list[Example] = []
    problems: list[str] = []
    for ex in s.examples:
        key = ex.category or "-"
        if per.get(key, 0) < s.options.per_category:
            per[key] = per.get(key, 0) + 1
            shown.append(ex)
    lost = [ex for ex in s.examples if ex.target_lost]
    if lost:
        problems.append(
            f"{len(lost)} of {len(s.examples)} examples lose their target to truncation at "
            f"seq_len {r.seq_len} (first: line {lost[0].line})"
        )
    on_prompt = [ex for ex in s.examples if _loss_on_prompt(ex)]
    if r.loss_on == "completion" and on_prompt:
        problems.append(
            f"loss covers the prompt in {len(on_prompt)} of {len(s.examples)} examples while "
            f"training.loss_on is completion (first: line {on_prompt[0].line})"
        )
    no_loss = [ex for ex in s.examples if not any(lab != IGNORE for lab in ex.labels)]
    if no_loss and len(no_loss) > len(lost):
        problems.append(f"{len(no_loss)} examples carry no loss at all")
    packing = r.manifest.training.packing
    isolation: dict[str, Any] | None = None
    if packing.enabled and len(s.examples) >= 2:
        isolation = packed_isolation(s)
        if not isolation["isolated"]:
            problems.append(
                "packed examples attend to each other: the second example's logits change "
                f"when packed after the first (max difference {isolation['max_diff']:.3g}) "
                f"with mask_policy {packing.mask_policy or 'unset'} and attention "
                f"{isolation['attention']}; set training.packing.mask_policy: block-diagonal "
                "with an attention implementation that honours it, or disable packing"
            )
    figures = {
        "packing": isolation,
        "examples": len(s.examples),
        "categories": per,
        "lost_target": len(lost),
        "loss_on_prompt": len(on_prompt),
        "max_tokens": max((len(e.input_ids) for e in s.examples), default=0),
        "rendered": [render(ex, r.tokenizer) for ex in shown],
    }
    summary = (
        f"{len(s.examples)} examples checked (the first of the training split), "
        f"{len(shown)} rendered over {len(per)} categories; loss as declared"
        if not problems
        else "; ".join(problems)
    )
    return Row("tokens", not problems, summary, figures, problems)


def packed_isolation(s: State) -> dict[str, Any]:
    """Pack two examples into one sequence as the manifest says (block-diagonal
    mask and restarting positions, or positions alone) and compare the second
    example's logits with the same example run alone: equal means isolated."""
    import torch

    r = s.recipe
    a, b = s.examples[0].input_ids, s.examples[1].input_ids
    model = r.build_model(r).to(s.device)
    model.eval()
    n, m = len(a), len(b)
    ids = torch.tensor([a + b], device=s.device)
    positions = torch.tensor([list(range(n)) + list(range(m))], device=s.device)
    block = r.manifest.training.packing.mask_policy == "block-diagonal"
    attention = getattr(model.config, "_attn_implementation", None) or "eager"
    with torch.no_grad():
        alone = model(input_ids=torch.tensor([b], device=s.device)).logits[0].float()
        if block:
            allowed = torch.zeros(n + m, n + m, dtype=torch.bool, device=s.device)
            allowed[:n, :n] = torch.tril(torch.ones(n, n, dtype=torch.bool, device=s.device))
            allowed[n:, n:] = torch.tril(torch.ones(m, m, dtype=torch.bool, device=s.device))
            mask = torch.zeros(1, 1, n + m, n + m, device=s.device)
            mask.masked_fill_(~allowed, torch.finfo(mask.dtype).min)
            packed = model(input_ids=ids, attention_mask=mask, position_ids=positions)
        else:
            packed = model(input_ids=ids, position_ids=positions)
    diff = float((packed.logits[0, n:].float() - alone).abs().max())
    return {"isolated": diff <= 1e-4, "max_diff": diff, "attention": attention,
            "mask_policy": r.manifest.training.packing.mask_policy}  # fmt: skip


def _loss_on_prompt(ex: Example) -> bool:
    return any(lab != IGNORE for lab in ex.labels[: min(ex.prompt_len, len(ex.labels))])


def render(ex: Example, tokenizer: Any) -> dict[str, Any]:
    """One example token by token: its text, whether it carries loss, special or not."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    out = []
    for i, tok in enumerate(ex.input_ids):
        out.append({
            "token": tokenizer.convert_ids_to_tokens(tok),
            "id": tok,
            "loss": i < len(ex.labels) and ex.labels[i] != IGNORE,
            "special": tok in special,
            "prompt": i < ex.prompt_len,
        })  # fmt: skip
    return {"line": ex.line, "category": ex.category, "tokens": out,
            "truncated": ex.prompt_len + ex.completion_len > len(ex.input_ids)}  # fmt: skip
