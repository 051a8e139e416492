"""What the Trainer built, before its first step: optimizer, determinism, steps, first batch.

Layer: edges - edge (integrations; torch and transformers imported inside the
functions).  The arguments can say one thing and the objects another: an
optimizer handed to ``Trainer(optimizers=...)``, determinism switched off
after ``seed_everything``, a collator that puts loss on the prompt.  These
checks read the objects the Trainer hands its callbacks at
``on_train_begin`` and return drift rows (``ftmanifest.integrations.recipe``
has the arguments' rows).

The first batch is the first ``micro_batch`` examples of the training
dataloader's dataset in stored order, collated by its own collator, with
every random generator's state restored afterwards, so peeking changes
neither the data order nor any later draw.  It is judged as preflight judges
formatted examples: no sequence longer than ``training.seq_len``; under
``loss_on: completion`` every sequence has prompt positions without loss
(label -100) and keeps at least one target position (a target cut away by
truncation is refused); under ``loss_on: all`` no position but the first
carries no loss.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.integrations.recipe import HINT, RULE
from ftmanifest.integrations.schedule import inner_optimizer
from ftmanifest.location import Loc
from ftmanifest.manifest.model import Manifest

IGNORE = -100
BATCH_RULE = "drift.first-batch"


def _row(path: str, loc: Loc, message: str, expected: Any, observed: Any, hint: str = HINT,
         rule: str = RULE) -> Finding:  # fmt: skip
    return Finding.at(loc, kind="drift", rule=rule, message=message, path=path,
                      expected=str(expected), observed=str(observed), hint=hint)  # fmt: skip


def judge_runtime(
    manifest: Manifest, path: str, *, args: Any, model: Any, optimizer: Any, max_steps: int
) -> list[Finding]:
    """Rows for the optimizer object, determinism switches, steps and checkpointing."""
    rows = _optimizer(manifest, path, args, model, optimizer)
    rows += _determinism(manifest, path)
    budget = manifest.experiment.budget.max_steps
    if budget is not None and max_steps > budget:
        rows.append(_row(path, ("experiment", "budget", "max_steps"),
                         "the run's steps exceed the budget", f"at most {budget}",
                         f"{max_steps} (the Trainer's state.max_steps)"))  # fmt: skip
    want = manifest.training.activation_checkpointing
    seen = _checkpointing(model)
    if seen is not None and seen != want:
        rows.append(_row(path, ("training", "activation_checkpointing"),
                         "the model's activation checkpointing is not the manifest's", want,
                         f"{seen} (model.is_activation_checkpointing)"))  # fmt: skip
    return rows


def _checkpointing(model: Any) -> bool | None:
    from ftmanifest.integrations.model_origin import unwrap_model

    base = unwrap_model(model)
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if name in type(base).__dict__ or any(name in c.__dict__ for c in type(base).__mro__):
            try:
                return bool(getattr(base, name))
            except Exception:  # noqa: BLE001 - a property that cannot answer
                return None
    return None


def _optimizer(
    manifest: Manifest, path: str, args: Any, model: Any, optimizer: Any
) -> list[Finding]:
    pinned = manifest.training.optimizer
    if pinned is None or optimizer is None:
        return []
    inner = inner_optimizer(optimizer)  # under accelerate's AcceleratedOptimizer
    loc: Loc = ("training", "optimizer", "name")
    try:
        from transformers import Trainer

        cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    except Exception as exc:  # noqa: BLE001 - an optimizer transformers cannot name
        return [_row(path, loc, "the optimizer the manifest names cannot be built here",
                     pinned.name, f"{type(exc).__name__}: {str(exc)[:200]}")]  # fmt: skip
    rows = []
    if not isinstance(inner, cls):
        rows.append(_row(path, loc, "the Trainer's optimizer is not the one the manifest names",
                         f"{cls.__module__}.{cls.__qualname__} ({pinned.name})",
                         f"{type(inner).__module__}.{type(inner).__qualname__}"))  # fmt: skip
        return rows
    defaults = getattr(inner, "defaults", {}) or {}
    for key, want in sorted((kwargs or {}).items()):
        if key in defaults and not _close(defaults[key], want):
            rows.append(_row(path, ("training", "optimizer", key),
                             f"the optimizer's {key} is not the one the arguments build", want,
                             f"{defaults[key]} (optimizer.defaults)"))  # fmt: skip
    # Every group: per-group rates (peft's LoRA+, an embedding rate) are rates the
    # manifest's one lr cannot describe.
    groups = list(getattr(inner, "param_groups", []))
    lrs = [g.get("initial_lr", g.get("lr")) for g in groups]
    other = [(i, lr) for i, lr in enumerate(lrs) if not _close(_float(lr), pinned.lr)]
    if other:
        per_group = len(set(map(_float, lrs))) > 1
        rows.append(_row(path, ("training", "optimizer", "lr"),
                         "the optimizer trains param groups at rates the manifest does not "
                         "describe (it pins one lr for every group)" if per_group else
                         "the optimizer's learning rate is not the manifest's", pinned.lr,
                         ", ".join(f"group {i} of {len(groups)}: {lr}" for i, lr in other)
                         + " (optimizer param_groups initial_lr)"))  # fmt: skip
    decays = {float(g.get("weight_decay", 0.0)) for g in getattr(inner, "param_groups", [])}
    if decays and not _close(max(decays), pinned.weight_decay):
        rows.append(
            _row(
                path,
                ("training", "optimizer", "weight_decay"),
                "the optimizer's weight decay is not the manifest's",
                pinned.weight_decay,
                f"{max(decays)} (optimizer param_groups)",
            )
        )
    return rows


def _float(value: Any) -> Any:
    try:
        return float(value)  # a 0-d tensor under capturable/fused optimizers
    except (TypeError, ValueError):
        return value


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))
    return bool(a == b)


def _determinism(manifest: Manifest, path: str) -> list[Finding]:
    import torch

    seeds = manifest.seeds
    rows = []
    on = torch.are_deterministic_algorithms_enabled()
    if on != seeds.deterministic:
        rows.append(
            _row(
                path,
                ("seeds", "deterministic"),
                "deterministic algorithms are not as the manifest says",
                seeds.deterministic,
                f"{on} (torch.are_deterministic_algorithms_enabled())",
                hint="training_arguments(MANIFEST) sets full_determinism; or call "
                "ftmanifest.seed_everything(MANIFEST) before building the Trainer",
            )
        )
    bench = bool(torch.backends.cudnn.benchmark)
    if bench != seeds.cudnn_benchmark:
        rows.append(
            _row(
                path,
                ("seeds", "cudnn_benchmark"),
                "cuDNN benchmark mode differs",
                seeds.cudnn_benchmark,
                f"{bench} (torch.backends.cudnn.benchmark)",
            )
        )
    return rows


# -- the first batch -------------------------------------------------------------


def first_batch(dataloader: Any, size: int) -> tuple[Mapping[str, Any] | None, str | None]:
    """``(batch, None)``, or ``(None, why it cannot be read)``; every RNG state restored."""
    if dataloader is None:
        return None, "the Trainer handed no training dataloader"
    dataset = getattr(dataloader, "dataset", None)
    collate = getattr(dataloader, "collate_fn", None)
    if dataset is None or collate is None:
        return None, "the dataloader has no dataset or collator to read"
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        return None, f"the dataset ({type(dataset).__name__}) cannot be indexed"
    import numpy as np
    import torch

    state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            n = min(size, len(dataset))
            return collate([dataset[i] for i in range(n)]), None
    except Exception as exc:  # noqa: BLE001 - what cannot be read is refused, never passed
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])


def judge_batch(
    manifest: Manifest, path: str, batch: Mapping[str, Any] | None, why: str | None
) -> list[Finding]:
    """Rows for the first batch against ``seq_len`` and ``loss_on``."""
    t = manifest.training
    if t.seq_len is None and t.loss_on is None:
        return []
    hint = "format the data as preflight does (ftmanifest preflight MANIFEST shows the examples)"

    def row(loc: Loc, message: str, expected: Any, observed: Any) -> Finding:
        return _row(path, loc, message, expected, observed, hint=hint, rule=BATCH_RULE)

    if batch is None:
        return [row(("training",), "the first batch cannot be judged", "a readable batch", why)]
    if not isinstance(batch, Mapping):
        return [row(("training",), "the first batch is not a mapping of tensors",
                    "a dict of tensors", type(batch).__name__)]  # fmt: skip
    rows: list[Finding] = []
    if t.seq_len is not None:
        for key in sorted(k for k in batch if k == "input_ids" or k.endswith("_input_ids")):
            length = _width(batch[key])
            if length is not None and length > t.seq_len:
                rows.append(row(("training", "seq_len"), f"a batch ({key}) is longer than seq_len",
                                f"at most {t.seq_len} tokens", f"{length} tokens"))  # fmt: skip
    if t.loss_on is not None and "input_ids" in batch:
        rows += _judge_labels(t.loss_on, batch, row)
    return rows


def _judge_labels(loss_on: str, batch: Mapping[str, Any], row: Callable[..., Finding]) -> list:
    loc: Loc = ("training", "loss_on")
    labels = _rows(batch.get("labels"))
    if labels is None and batch.get("completion_mask") is not None:
        # TRL's preference collators: 1 where the completion carries loss.
        ids, keep = _rows(batch["input_ids"]), _rows(batch["completion_mask"])
        if ids is not None and keep is not None:
            labels = [[t if k else IGNORE for t, k in zip(a, b, strict=False)]
                      for a, b in zip(ids, keep, strict=False)]  # fmt: skip
    if labels is None:
        return [row(loc, "the first batch has no labels: which positions carry loss is unknown",
                    loss_on, "no labels in the batch")]  # fmt: skip
    mask = _rows(batch.get("attention_mask"))
    for i, seq in enumerate(labels):
        real = mask[i] if mask is not None and i < len(mask) else [1] * len(seq)
        positions = [p for p, m in enumerate(real) if m]
        unlabelled = [p for p in positions if seq[p] == IGNORE]
        labelled = len(positions) - len(unlabelled)
        if loss_on == "completion":
            if not unlabelled:
                return [row(loc, f"sequence {i} of the first batch carries loss on every token",
                            "completion: prompt positions labelled -100",
                            f"{labelled} of {len(positions)} tokens carry loss")]  # fmt: skip
            if labelled == 0:
                return [row(loc, f"sequence {i} of the first batch has no target left "
                            "(truncated away?)", "at least one completion token with loss",
                            f"0 of {len(positions)} tokens carry loss")]  # fmt: skip
        elif loss_on == "all" and [p for p in unlabelled if p != positions[0]]:
            return [
                row(
                    loc,
                    f"sequence {i} of the first batch has positions without loss",
                    "all: every token but the first carries loss",
                    f"{len(unlabelled)} of {len(positions)} tokens without loss",
                )
            ]
    return []


def _rows(value: Any) -> list[list[int]] | None:
    if value is None:
        return None
    tolist = getattr(value, "tolist", None)
    data = tolist() if callable(tolist) else value
    if isinstance(data, list) and data and isinstance(data[0], int):
        data = [data]
    return data if isinstance(data, list) else None


def _width(value: Any) -> int | None:
    shape = getattr(value, "shape", None)
    if shape is not None and len(shape) >= 1:
        return int(shape[-1])
    rows = _rows(value)
    return max((len(r) for r in rows), default=0) if rows else None
