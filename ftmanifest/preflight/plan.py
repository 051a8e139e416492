"""A rental plan in the method's phases, from measured throughput.

Layer: judging rooms - pure core (``make_plan`` takes figures, returns the plan);
``inputs`` is the edge that reads them: the sustained tokens/s of the newest passing
preflight of this recipe (or ``--tokens-per-second``), and the token counts of the
training and evaluation splits as formatted with the pinned tokenizer.

Phases, in hours:

    first checks   preflight again on the rented machine (its measured seconds)
                   plus setup (installing and downloading, ``setup_hours``)
    experiment     training tokens / sustained tokens per second, where training
                   tokens = steps x micro_batch x grad_accum x world_size x the
                   mean formatted example length (capped at seq_len); steps are
                   training.max_steps, else epochs x examples / sequences per step
    evaluation     the eval splits' tokens, forward only (a third of a training
                   step's cost per token), once per evaluation (``evaluations``)
    resume test    reloading a checkpoint in a new process and one step (the
                   preflight resume row's seconds, at least a minute)
    export         writing the deliverable (model bytes / ``disk_mb_s``)
    margin         retries: ``retry_share`` of the experiment, plus one reload

The plan refuses when the total exceeds the rental (``days`` x 24 h) or the
manifest's budget (``max_hours``; ``max_gpu_hours`` over the devices), and
says by how much.  Parameter-count tables are not used: the method calls
them unreliable (sequence length, precision, optimizer state, activations,
adapters, attention kernel and batching all change the result).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ftmanifest.errors import InputError
from ftmanifest.manifest import LoadedManifest
from ftmanifest.manifest.model import Manifest
from ftmanifest.preflight.recipe import default_recipe
from ftmanifest.preflight.run import recorded_rows
from ftmanifest.recordio import iter_records


@dataclass(frozen=True)
class Figures:
    tokens_per_second: float
    train_examples: int
    train_mean_tokens: float
    eval_tokens: int
    steps: int
    sequences_per_step: int
    preflight_seconds: float
    resume_seconds: float
    model_bytes: int
    devices: int = 1
    source: str = "preflight"


@dataclass(frozen=True)
class Assumptions:
    setup_hours: float = 0.5
    evaluations: int = 2  # the baseline's and the candidate's
    disk_mb_s: float = 200.0
    retry_share: float = 0.15


@dataclass
class Plan:
    days: float
    phases: list[tuple[str, float, str]] = field(default_factory=list)  # name, hours, how
    refusals: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(h for _, h, _ in self.phases)

    @property
    def ok(self) -> bool:
        return not self.refusals

    def to_dict(self) -> dict[str, Any]:
        return {
            "days": self.days,
            "rental_hours": self.days * 24,
            "total_hours": self.total,
            "phases": [{"phase": n, "hours": h, "how": how} for n, h, how in self.phases],
            "fits": self.ok,
            "refusals": self.refusals,
            "figures": self.figures,
        }


def steps_of(manifest: Manifest, train_examples: int, sequences_per_step: int) -> int:
    t = manifest.training
    if t.max_steps:
        return int(t.max_steps)
    epochs = t.epochs or 1.0
    return max(1, math.ceil(epochs * train_examples / max(sequences_per_step, 1)))


def _rate(rate: float) -> str:
    """A throughput as a reader counts it: ``19,360``, never ``1.936e+04``."""
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


def make_plan(manifest: Manifest, days: float, f: Figures, a: Assumptions | None = None) -> Plan:
    a = a or Assumptions()
    if not f.tokens_per_second > 0:
        raise ValueError("tokens_per_second must be > 0")
    plan = Plan(days=days)
    rate = f.tokens_per_second
    train_tokens = f.steps * f.sequences_per_step * f.train_mean_tokens
    experiment = train_tokens / rate / 3600
    first = a.setup_hours + f.preflight_seconds / 3600
    evaluation = a.evaluations * f.eval_tokens / (3 * rate) / 3600
    resume = max(f.resume_seconds, 60.0) / 3600
    export = f.model_bytes / (a.disk_mb_s * 1e6) / 3600
    margin = a.retry_share * experiment + resume
    plan.phases = [
        ("first checks", first,
         f"setup {a.setup_hours:g} h + preflight {f.preflight_seconds:.0f} s"),
        ("experiment", experiment, f"{f.steps} steps x {f.sequences_per_step} sequences x "
         f"{f.train_mean_tokens:.1f} tokens at {_rate(rate)} tokens/s ({f.source})"),
        ("evaluation", evaluation, f"{a.evaluations} x {f.eval_tokens} tokens, forward only"),
        ("resume test", resume, "reload a checkpoint in a new process and one step"),
        ("export", export, f"{f.model_bytes / 2**20:.1f} MiB at {a.disk_mb_s:g} MB/s"),
        ("margin", margin, f"retries ({a.retry_share:.0%} of the experiment) and one reload"),
    ]  # fmt: skip
    plan.figures = {"train_tokens": train_tokens, "tokens_per_second": rate,
                    "steps": f.steps, "devices": f.devices}  # fmt: skip
    rental = days * 24
    if plan.total > rental:
        plan.refusals.append(
            f"the plan needs {plan.total:.2f} h, {plan.total - rental:.2f} h more than the "
            f"{days:g}-day rental ({rental:g} h)"
        )
    budget = manifest.experiment.budget
    if budget.max_hours is not None and plan.total > budget.max_hours:
        plan.refusals.append(
            f"the plan needs {plan.total:.2f} h, {plan.total - budget.max_hours:.2f} h more than "
            f"experiment.budget.max_hours ({budget.max_hours:g})"
        )
    gpu_hours = plan.total * f.devices
    if budget.max_gpu_hours is not None and gpu_hours > budget.max_gpu_hours:
        plan.refusals.append(
            f"the plan needs {gpu_hours:.2f} GPU-h on {f.devices} device(s), "
            f"{gpu_hours - budget.max_gpu_hours:.2f} more than experiment.budget.max_gpu_hours "
            f"({budget.max_gpu_hours:g})"
        )
    if budget.max_steps is not None and f.steps > budget.max_steps:
        plan.refusals.append(
            f"{f.steps} steps planned, {f.steps - budget.max_steps} more than "
            f"experiment.budget.max_steps ({budget.max_steps})"
        )
    return plan


# -- the edge: reading the figures ----------------------------------------------


def last_preflight(loaded: LoadedManifest, ledger: Any) -> dict[str, Any] | None:
    """The newest preflight of this recipe whose throughput row passed."""
    found = [r for r in recorded_rows(loaded, ledger) if r.get("throughput", {}).get("ok")]
    return {**found[-1]["_record"], "by_name": found[-1]} if found else None


def inputs(loaded: LoadedManifest, *, tokens_per_second: float | None, ledger: Any) -> Figures:
    from pathlib import Path

    record = last_preflight(loaded, ledger)
    given = tokens_per_second is not None
    if tokens_per_second is None:
        if record is None:
            raise InputError(
                "no measured throughput for this recipe",
                path=str(loaded.path),
                field="throughput",
                expected="a passing `ftmanifest preflight` throughput row for this recipe",
                observed="none in the ledger",
                hint=f"ftmanifest preflight {loaded.path} (or pass --tokens-per-second N)",
            )
        tokens_per_second = float(
            record["by_name"]["throughput"]["figures"]["sustained_tokens_per_s"]
        )
    recipe = default_recipe(loaded)
    m = loaded.manifest
    world = m.distributed.world_size
    per_step = recipe.micro_batch * recipe.grad_accum * world

    def tokens(role: tuple[str, ...]) -> tuple[int, int]:
        """(examples, tokens) of every split with ``role``, streamed, as formatted."""
        count = total = 0
        for entry in m.data:
            if entry.role in role:
                for rec in iter_records(Path(loaded.path).parent / entry.path, entry.format):
                    ex = recipe.format(rec.value, recipe.tokenizer, recipe.seq_len, recipe.loss_on)
                    count += 1
                    total += len(ex.input_ids)
        return count, total

    n_train, train_tokens = tokens(("train",))
    _, eval_tokens = tokens(("eval", "baseline-eval"))
    rows = record["by_name"] if record else {}
    model_bytes = sum(p.stat().st_size for p in recipe.model_folder.glob("*.safetensors"))
    return Figures(
        tokens_per_second=tokens_per_second,
        train_examples=n_train,
        train_mean_tokens=train_tokens / max(n_train, 1),
        eval_tokens=eval_tokens,
        steps=steps_of(m, n_train, per_step),
        sequences_per_step=per_step,
        preflight_seconds=float(record.get("seconds", 0.0)) if record else 0.0,
        resume_seconds=float(rows.get("resume", {}).get("figures", {}).get("seconds", 60.0)),
        model_bytes=model_bytes,
        devices=max(world, 1),
        source="given" if given else "preflight",
    )
