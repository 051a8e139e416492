"""The learning rate every optimizer step applies, against the pinned schedule.

Layer: edges - edge (integrations; torch and transformers imported inside the
functions).  The arguments and the scheduler can be the manifest's before
step 1 and the learning rate another at step 5: a callback, a
``compute_loss`` of its own or a scheduler handed to the Trainer can write
``optimizer.param_groups[i]["lr"]`` at any time.  ``pinned_schedule`` builds
the schedule the manifest pins (``training.optimizer``: lr, schedule,
warmup_steps, over the run's ``max_steps``) the way the Trainer builds it
(``transformers.get_scheduler``), on a probe optimizer; ``StepGuard`` hooks
the real optimizer's ``step`` (``register_step_pre_hook``: it runs inside
``step`` itself, after every callback) and compares each param group's
learning rate with ``base * factor(k)``, ``k`` the optimizer steps taken
(what the Trainer's scheduler has counted: a step fp16's scaler skips is
neither taken nor scheduled).  ``base`` is each group's starting rate, which
``runtime`` holds to the pinned lr before step 1, so per-group rates (LoRA+)
are refused there, as the manifest cannot describe them.

The same hook holds the rest of the step to what was judged before step 1
(``drift.optimizer-step``): each group's ``betas``, ``eps`` and
``weight_decay`` as they were at train begin, and which of the model's
parameters train (``requires_grad``): a callback that changes weight decay
or unfreezes a layer mid-run stops before the step that would apply it.
Without a pinned schedule only these are checked.  The cost is one pass
over the param groups and one over the model's parameter flags per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.location import Loc
from ftmanifest.manifest.model import Manifest

RULE = "drift.lr-schedule"
STEP_RULE = "drift.optimizer-step"
HELD = ("betas", "eps", "weight_decay")
STEP_HINT = (
    "change nothing of the optimizer or of which parameters train after train begins "
    "(no callback or code of its own writing param_groups or requires_grad), or change "
    "the manifest and re-sign"
)
HINT = (
    "let the Trainer's scheduler alone set the learning rate (no callback or code of its "
    "own writing optimizer.param_groups[...]['lr']), or change training.optimizer and re-sign"
)


@dataclass(frozen=True)
class PinnedSchedule:
    """The pinned schedule: the factor of the starting rate after ``k`` optimizer steps."""

    name: str
    lr: float
    warmup_steps: int
    total_steps: int
    factor: Callable[[int], float]


def _row(path: str, loc: Loc, message: str, expected: Any, observed: Any,
         hint: str = HINT) -> Finding:  # fmt: skip
    return Finding.at(loc, kind="drift", rule=RULE, message=message, path=path,
                      expected=str(expected), observed=str(observed), hint=hint)  # fmt: skip


def pinned_schedule(
    manifest: Manifest, path: str, total_steps: int
) -> tuple[PinnedSchedule | None, list[Finding], str | None]:
    """``(schedule, rows, why not compared)``: rows when the pinned schedule cannot be
    built from the manifest's values; ``why`` when the manifest pins none to compare."""
    opt = manifest.training.optimizer
    if opt is None or opt.schedule is None:
        return None, [], "the manifest pins no training.optimizer.schedule"
    import torch
    from transformers import get_scheduler

    probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=float(opt.lr))
    loc: Loc = ("training", "optimizer", "schedule")
    try:
        built = get_scheduler(
            opt.schedule,
            optimizer=probe,
            num_warmup_steps=int(opt.warmup_steps),
            num_training_steps=int(total_steps),
        )
    except Exception as exc:  # noqa: BLE001 - a schedule the manifest cannot describe: refused
        row = _row(
            path,
            loc,
            "the pinned schedule cannot be built from the manifest's values "
            "(lr, schedule, warmup_steps, max_steps) alone",
            "a schedule transformers builds without lr_scheduler_kwargs",
            f"{opt.schedule}: {type(exc).__name__}: {str(exc)[:200]}",
        )
        return None, [row], None
    lambdas = getattr(built, "lr_lambdas", None)
    if not isinstance(built, torch.optim.lr_scheduler.LambdaLR) or not lambdas:
        why = f"{opt.schedule} ({type(built).__name__}) depends on more than the step count"
        return None, [], why
    return PinnedSchedule(opt.schedule, float(opt.lr), int(opt.warmup_steps),
                          int(total_steps), lambdas[0]), [], None  # fmt: skip


def inner_optimizer(optimizer: Any) -> Any:
    """The optimizer under accelerate's (and similar) wrappers."""
    inner = optimizer
    for _ in range(4):
        wrapped = getattr(inner, "optimizer", None)
        if wrapped is None or wrapped is inner:
            break
        inner = wrapped
    return inner


def _value(value: Any) -> Any:
    """A hyper-parameter as plain data (0-d tensors under capturable optimizers)."""
    if isinstance(value, (tuple, list)):
        return tuple(_value(v) for v in value)
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _lr(group: dict[str, Any]) -> float:
    return float(group["lr"])  # a 0-d tensor under capturable/fused optimizers


class StepGuard:
    """Checks each step's learning rates; ``refuse(step_index, rows)`` must raise."""

    def __init__(
        self,
        schedule: PinnedSchedule | None,
        optimizer: Any,
        start: int,
        path: str,
        refuse: Callable[[int, list[Finding]], None],
        model: Any = None,
    ) -> None:
        self.schedule, self.path, self.refuse = schedule, path, refuse
        self.inner = inner_optimizer(optimizer)
        groups = self.inner.param_groups
        self.bases = [float(g.get("initial_lr", _lr(g))) for g in groups]
        self.held = [{k: _value(g[k]) for k in HELD if k in g} for g in groups]
        self.params = list(model.parameters()) if model is not None else []
        self.trainable = [bool(p.requires_grad) for p in self.params]
        self.names = [n for n, _ in model.named_parameters()] if model is not None else []
        self.index = start  # optimizer steps taken (the scheduler's count)
        self.checked = 0
        self.handle: Any = None
        hook = getattr(self.inner, "register_step_pre_hook", None)
        if callable(hook):
            self.handle = hook(lambda _opt, _args, _kwargs: self.check())

    @property
    def hooked(self) -> bool:
        return self.handle is not None

    def check(self) -> None:
        """Compare every group's lr now (just before a step) with the pinned one."""
        rows = self.judge()
        if rows:
            self.refuse(self.index, rows)
        self.index += 1
        self.checked += 1

    def judge(self) -> list[Finding]:
        groups = self.inner.param_groups
        loc: Loc = ("training", "optimizer", "schedule")
        if len(groups) != len(self.bases):
            return [_row(self.path, loc, "the optimizer's param groups changed during training",
                         f"{len(self.bases)} groups", f"{len(groups)} groups")]  # fmt: skip
        rows = self._held(groups) + self._trainable()
        if self.schedule is None or rows:
            return rows
        factor = self.schedule.factor(self.index)
        wrong = []
        for i, (group, base) in enumerate(zip(groups, self.bases, strict=True)):
            want, seen = base * factor, _lr(group)
            if not math.isclose(seen, want, rel_tol=1e-9, abs_tol=1e-15):
                wrong.append((i, want, seen))
        if not wrong:
            return []
        s = self.schedule
        return [_row(self.path, loc,
                     f"the learning rate applied at optimizer step {self.index + 1} is not the "
                     f"pinned schedule's ({s.name}, lr {s.lr:g}, warmup {s.warmup_steps}, "
                     f"{s.total_steps} steps)",
                     ", ".join(f"group {i}: {want:.6g}" for i, want, _ in wrong),
                     ", ".join(f"group {i}: {seen:.6g} (optimizer.param_groups[{i}]['lr'])"
                               for i, _, seen in wrong))]  # fmt: skip

    def _held(self, groups: list[dict[str, Any]]) -> list[Finding]:
        rows = []
        for i, (group, held) in enumerate(zip(groups, self.held, strict=True)):
            for key, want in held.items():
                seen = _value(group.get(key))
                if seen != want:
                    rows.append(self._step_row(
                        ("training", "optimizer", key),
                        f"the optimizer's {key} changed during training, before optimizer step "
                        f"{self.index + 1}", f"group {i}: {want} (at train begin)",
                        f"group {i}: {seen} (optimizer.param_groups[{i}]['{key}'])"))  # fmt: skip
        return rows

    def _trainable(self) -> list[Finding]:
        now = [bool(p.requires_grad) for p in self.params]
        if now == self.trainable:
            return []
        changed = [i for i, (a, b) in enumerate(zip(self.trainable, now, strict=True)) if a != b]
        shown = ", ".join(f"{self.names[i]} ({'trains' if now[i] else 'frozen'})"
                          for i in changed[:5])  # fmt: skip
        return [self._step_row(("method",), "the parameters that train changed during "
                               f"training, before optimizer step {self.index + 1}",
                               f"{sum(self.trainable)} trainable tensors, as at train begin",
                               f"{len(changed)} changed: {shown}")]  # fmt: skip

    def _step_row(self, loc: Loc, message: str, expected: str, observed: str) -> Finding:
        return Finding.at(loc, kind="drift", rule=STEP_RULE, message=message, path=self.path,
                          expected=expected, observed=observed, hint=STEP_HINT)  # fmt: skip

    def remove(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
