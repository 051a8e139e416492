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

A check that cannot run (no model, an import error) is a failed row naming why,
never a pass.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.hfcache import cached_revisions
from ftmanifest.preflight.measured import allocator_here
from ftmanifest.preflight.recipe import IGNORE, Example, Recipe
from ftmanifest.preflight.repeat import (
    CUDA_TOLERANCE,
    child_result,
    compare,
    run_child,
    tensor_digests,
)
from ftmanifest.preflight.steps import PeakMemory, eval_loss, micro_batches, pad_id, train_step
from ftmanifest.seeding import seed_everything


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


# -- step and update ------------------------------------------------------------


def _model_and_batches(
    s: State, count: int | None = None, pad_to: int | None = None
) -> tuple[Any, Any, Any]:
    r = s.recipe
    model = r.build_model(r).to(s.device)
    optimizer = r.make_optimizer(model, r)
    examples = s.examples if count is None else s.examples[:count]
    pad = pad_id(r.tokenizer)
    batches = micro_batches(examples, r.micro_batch, r.grad_accum, pad, s.device, pad_to=pad_to)
    return model, optimizer, batches


def step(s: State) -> Row:
    r = s.recipe
    # padded to seq_len: the step is measured at the shape the manifest sizes (and
    # the estimate computes), not at the longest example's
    model, optimizer, batches = _model_and_batches(s, pad_to=r.seq_len)
    with PeakMemory(s.device) as peak:
        loss = train_step(model, optimizer, batches, r.loss_normalization, r.precision)
    width = max((int(b["input_ids"].size(1)) for b in batches), default=0)
    figures = {
        "loss": loss,
        "precision": r.precision,
        "activation_checkpointing": r.checkpointing,
        "seq_len": r.seq_len,
        "micro_batch": r.micro_batch,
        "grad_accum": r.grad_accum,
        "loss_normalization": r.loss_normalization,
        "peak_host_bytes": peak.host,
        "host_bytes_before": peak.host_before,
        "peak_device_bytes": peak.device_peak,
        "memory_method": peak.method,
        "measured_shape": {"seq_len": width, "micro_batch": r.micro_batch},
        "allocator": allocator_here(getattr(s.device, "type", "cpu")),
    }
    if not math.isfinite(loss):
        return Row("step", False, f"the step's loss is {loss}", figures)
    host = f"{(peak.host or 0) / 2**20:.0f} MiB host peak"
    dev = f", {peak.device_peak / 2**20:.0f} MiB device peak" if peak.device_peak else ""
    return Row("step", True, f"loss {loss:.4f}; {host}{dev}", figures)


def update(s: State) -> Row:
    import torch

    r = s.recipe
    model, optimizer, batches = _model_and_batches(s)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for _ in range(2):  # LoRA's A only moves once B is non-zero: two steps
        train_step(model, optimizer, batches, r.loss_normalization, r.precision)
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())}
    expected = {n for n, _ in model.named_parameters() if r.expected_trainable(n)}
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    unexpected = sorted(changed - expected)
    unchanged = sorted(expected - changed)
    details = [f"changed but should not: {n}" for n in unexpected[:20]]
    details += [f"should change but did not: {n}" for n in unchanged[:20]]
    declared = getattr(r.manifest.method, "trainable_params", None)
    if declared is not None and declared != trainable:
        details.append(f"trainable parameters {trainable}, manifest says {declared}")
    if not expected:
        details.append("no parameter is meant to be trained (check method and frozen_modules)")
    figures = {"changed": len(changed), "expected": len(expected), "trainable_params": trainable,
               "declared_trainable_params": declared, "unexpected": unexpected[:50],
               "unchanged": unchanged[:50]}  # fmt: skip
    ok = not details
    summary = (
        f"{len(changed)} tensors changed, all expected; {trainable} trainable parameters"
        if ok
        else f"{len(unexpected)} changed unexpectedly, {len(unchanged)} did not change"
        + ("; trainable count differs" if declared is not None and declared != trainable else "")
    )
    return Row("update", ok, summary, figures, details)


def overfit(s: State) -> Row:
    r = s.recipe
    o = s.options
    model, optimizer, batches = _model_and_batches(s, count=o.overfit_examples)
    lr = o.overfit_lr or (r.lr if r.manifest.training.optimizer is not None else 1e-2)
    lr_from = (
        "--overfit-lr" if o.overfit_lr else
        "training.optimizer.lr" if r.manifest.training.optimizer is not None else
        "the default: the manifest names no training.optimizer"
    )  # fmt: skip
    used = type(optimizer).__name__
    for group in optimizer.param_groups:
        group["lr"] = lr
    start = eval_loss(model, batches)
    target = start * o.overfit_ratio
    losses = []
    reached = None
    for i in range(o.overfit_steps):
        train_step(model, optimizer, batches, r.loss_normalization, r.precision)
        now = eval_loss(model, batches)
        losses.append(now)
        if now <= target:
            reached = i + 1
            break
    figures = {"examples": o.overfit_examples, "start_loss": start, "target_loss": target,
               "final_loss": losses[-1] if losses else start, "steps": len(losses),
               "step_budget": o.overfit_steps, "lr": lr, "lr_from": lr_from,
               "optimizer": used}  # fmt: skip
    if reached is None:
        return Row("overfit", False,
                   f"loss {figures['final_loss']:.4f} did not fall below {target:.4f} "
                   f"({o.overfit_ratio:g} x start {start:.4f}) in {o.overfit_steps} steps "
                   f"with {used} at lr {lr:g} (from {lr_from})",
                   figures, ["labels, template or optimizer settings may be broken; "
                             "try --overfit-lr or --overfit-steps to tell a slow "
                             "optimizer from a broken recipe"])  # fmt: skip
    return Row("overfit", True, f"loss {start:.4f} -> {losses[-1]:.4f} in {reached} steps",
               figures)  # fmt: skip


CHECKS: dict[str, Check] = {
    "stack": stack,
    "disk": disk,
    "tokens": tokens,
    "step": step,
    "update": update,
    "overfit": overfit,
}


# -- resume, determinism, throughput ---------------------------------------------


def trainable_digest(model: Any) -> str:
    return tensor_digests(model)[0]


def greedy(model: Any, tokenizer: Any, example: Example, device: Any, new: int = 4) -> list[int]:
    """A few greedy tokens after the example's prompt (the generation check)."""
    import torch

    prompt = example.input_ids[: max(1, min(example.prompt_len, len(example.input_ids)))]
    model.eval()
    with torch.no_grad():
        ids = torch.tensor([prompt], device=device)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=new, do_sample=False,
                             pad_token_id=pad_id(tokenizer))  # fmt: skip
    return [int(t) for t in out[0][len(prompt) :]]


def resume(s: State) -> Row:
    import json
    import os
    import subprocess
    import sys
    import tempfile

    r = s.recipe
    model, optimizer, batches = _model_and_batches(s)
    for _ in range(2):
        train_step(model, optimizer, batches, r.loss_normalization, r.precision)
    with tempfile.TemporaryDirectory(prefix="ftmanifest-resume-") as tmp:
        folder = Path(tmp) / "checkpoint"
        r.save(model, optimizer, folder)
        before = greedy(model, r.tokenizer, s.examples[0], s.device)
        seed_everything(r.manifest)
        here = [
            train_step(model, optimizer, batches, r.loss_normalization, r.precision)
            for _ in range(2)
        ]
        here_digest = trainable_digest(model)
        argv = [sys.executable, "-m", "ftmanifest.preflight.resume_child",
                str(r.manifest_path), str(folder), r.source, s.options.device]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})  # fmt: skip
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Row("resume", False, f"the checkpoint did not load in a new process: {tail}"[:300])
    there = json.loads(done.stdout.strip().splitlines()[-1])
    details = []
    if there["generated"] != before:
        details.append(f"generation after reload {there['generated']} != before {before}")
    if there["losses"][0] != here[0]:
        details.append(f"first resumed loss {there['losses'][0]!r} != {here[0]!r}: the "
                       "weights were not restored")  # fmt: skip
    elif there["losses"][1] != here[1] or there["digest"] != here_digest:
        details.append("the steps after resuming differ: the optimizer state was not restored")
    figures = {"losses_in_process": here, "losses_new_process": there["losses"],
               "generated": before, "optimizer_state_tensors": there["state_tensors"]}  # fmt: skip
    if details:
        return Row("resume", False, "; ".join(details), figures, details)
    return Row("resume", True, "checkpoint resumed in a new process: losses, weights and "
               "generation identical", figures)  # fmt: skip


def determinism(s: State) -> Row:
    """The first steps twice, each in a fresh process whose generators were set from
    the OS, compared: bitwise on the CPU, within ``CUDA_TOLERANCE`` elsewhere."""
    r = s.recipe
    count = 2 if s.options.repeat else 1
    start = (str(r.manifest_path), r.source, s.options.device)
    if s.options.device == "cpu":  # side by side; an accelerator's memory holds one at a time
        runs = [child_result(p) for p in [run_child(*start) for _ in range(count)]]
    else:
        runs = [child_result(run_child(*start)) for _ in range(count)]
    why = next((x for x in runs if isinstance(x, str)), None)
    if why is not None:
        return Row("determinism", False, f"the first steps did not run in a fresh process: {why}")
    done = [x for x in runs if not isinstance(x, str)]
    tolerance = None if done[0].device == "cpu" else CUDA_TOLERANCE
    figures: dict[str, Any] = {
        "steps": len(done[0].losses),
        "compared": "bitwise" if tolerance is None else f"relative {tolerance:g}",
        "runs": [{k: v for k, v in x.to_dict().items() if k != "tensors"} for x in done],
        "kernels": sorted({k for x in done for k in x.kernels}),
        "deterministic_flag": bool(r.manifest.seeds.deterministic),
    }
    shown = [f"run {i}: losses {x.losses}, weights {x.digest[:23]}"
             for i, x in enumerate(done, start=1)]  # fmt: skip
    if figures["kernels"]:
        shown.append("non-deterministic kernels seen: " + ", ".join(figures["kernels"]))
    if len(done) == 1:
        return Row("determinism", True, f"the first {figures['steps']} steps ran once in a "
                   "fresh process (--no-repeat): not compared", figures, shown)  # fmt: skip
    error = compare(done[0], done[1], tolerance)
    if error is None:
        return Row("determinism", True, f"the first {figures['steps']} steps twice in fresh "
                   f"processes: losses and trainable weights equal {figures['compared']}",
                   figures, shown)  # fmt: skip
    figures["first_difference"] = {"at": error.field, "observed": error.observed}
    details = [*shown, f"expected {error.expected}, observed {error.observed}"]
    details += ["would fix it: " + c for c in (error.hint or "").split("likely causes: ")[-1]
                .split(" | ")]  # fmt: skip
    return Row("determinism", False, error.message, figures, details, reason=error.reason)


def throughput(s: State) -> Row:
    import time

    r = s.recipe
    model, optimizer, batches = _model_and_batches(s)
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)

    def timed(n: int) -> float:
        _sync(s.device)
        t0 = time.perf_counter()
        for _ in range(n):
            train_step(model, optimizer, batches, r.loss_normalization, r.precision)
        _sync(s.device)
        return time.perf_counter() - t0

    first = timed(2)
    window, steps = 0.0, 0
    while window < s.options.throughput_seconds and steps < 500:
        window += timed(1)
        steps += 1
    early = 2 * tokens / first if first > 0 else 0.0
    sustained = steps * tokens / window if window > 0 else 0.0
    figures: dict[str, Any] = {"tokens_per_step": tokens, "first_tokens_per_s": early,
                               "sustained_tokens_per_s": sustained, "window_steps": steps,
                               "window_seconds": window, **_gpu_state()}  # fmt: skip
    if sustained <= 0:
        return Row("throughput", False, "no throughput measured", figures)
    summary = f"{sustained:.0f} tokens/s sustained over {steps} steps ({early:.0f} in the first)"
    notes = []
    if sustained < 0.7 * early:  # a note, not a failure: a shared machine slows down too
        notes.append(
            "sustained throughput is more than 30% below the first steps': plan "
            "with the sustained figure (throttling, or other load on the machine)"
        )
    return Row("throughput", True, summary, figures, notes)


def _sync(device: Any) -> None:
    import torch

    if getattr(device, "type", "cpu") == "cuda":
        torch.cuda.synchronize(device)


def _gpu_state() -> dict[str, Any]:
    """Temperature and SM clock from nvidia-smi, where there is one."""
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return {}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=temperature.gpu,clocks.sm",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    rows = [line.split(",") for line in out.stdout.strip().splitlines() if "," in line]
    return {"gpu_temperature_c": [r[0].strip() for r in rows],
            "gpu_sm_clock_mhz": [r[1].strip() for r in rows]}  # fmt: skip


CHECKS.update(resume=resume, determinism=determinism, throughput=throughput)
