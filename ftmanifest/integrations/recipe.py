"""The recipe a Trainer really runs, against the manifest.

Layer: edges - edge (integrations), judging plain data.  ``effective_arguments``
turns a ``TrainingArguments`` (or a TRL config) into JSON-able data with its
digest, for the run record; ``judge_arguments`` compares that data with the
manifest, one drift row per difference: seeds, micro batch, gradient
accumulation, steps or epochs, learning rate, schedule and warm-up, weight
decay, optimizer and its pinned parameters, gradient clipping, precision,
activation checkpointing, and for TRL: ``max_length`` against ``seq_len``,
packing, completion/assistant-only loss against ``loss_on``, the objective
(the config's class: ``DPOConfig`` is ``dpo``) and its parameters.

``FIELDS`` is the one table from manifest field to ``TrainingArguments``
field; the builders (``ftmanifest.integrations.builders``) read the same
table, so what they build always passes.  ``training.options`` pins any other
field by name, compared exactly.  What has no Trainer counterpart
(``loss_normalization``, ``packing.mask_policy``, ``fp8``...) is listed in
``not_compared``; every other field that is neither pinned nor neutral
(``ftmanifest.integrations.options``) and not at its default is refused
(``drift.unpinned-option``) and listed in ``unpinned``.

Nothing here imports transformers; the objects are read by attribute.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.integrations.options import judge_unpinned
from ftmanifest.integrations.options import same as _same
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest.model import Manifest

RULE = "drift.recipe"
HINT = (
    "build the arguments from the manifest: ftmanifest.integrations.transformers."
    "training_arguments(MANIFEST) (or sft_config / dpo_config), or change the manifest "
    "and re-sign it"
)


def _opt(m: Any) -> Any:
    return m.training.optimizer


# (manifest location, TrainingArguments field, the pinned value or None).
# A None pin is not compared.  One row of this table is one comparison and
# one keyword of the builders.
FIELDS: tuple[tuple[Loc, str, Callable[[Any], Any]], ...] = (
    (("seeds", "torch"), "seed", lambda m: m.seeds.torch),
    (("seeds", "python"), "seed", lambda m: m.seeds.python),
    (("seeds", "numpy"), "seed", lambda m: m.seeds.numpy),
    (("seeds", "data_order"), "data_seed", lambda m: m.seeds.data_order),
    (("training", "micro_batch"), "per_device_train_batch_size", lambda m: m.training.micro_batch),
    (("training", "grad_accum"), "gradient_accumulation_steps", lambda m: m.training.grad_accum),
    (("training", "max_grad_norm"), "max_grad_norm", lambda m: m.training.max_grad_norm),
    (
        ("training", "activation_checkpointing"),
        "gradient_checkpointing",
        lambda m: m.training.activation_checkpointing,
    ),
    (("training", "optimizer", "name"), "optim", lambda m: _opt(m) and _opt(m).name),
    (("training", "optimizer", "lr"), "learning_rate", lambda m: _opt(m) and _opt(m).lr),
    (
        ("training", "optimizer", "weight_decay"),
        "weight_decay",
        lambda m: _opt(m) and _opt(m).weight_decay,
    ),
    (
        ("training", "optimizer", "schedule"),
        "lr_scheduler_type",
        lambda m: _opt(m) and _opt(m).schedule,
    ),
    (
        ("training", "optimizer", "warmup_steps"),
        "warmup_steps",
        lambda m: _opt(m) and _opt(m).warmup_steps,
    ),
    (
        ("training", "optimizer", "betas"),
        "adam_beta1",
        lambda m: _opt(m) and _opt(m).betas and _opt(m).betas[0],
    ),
    (
        ("training", "optimizer", "betas"),
        "adam_beta2",
        lambda m: _opt(m) and _opt(m).betas and _opt(m).betas[1],
    ),
    (("training", "optimizer", "eps"), "adam_epsilon", lambda m: _opt(m) and _opt(m).eps),
)

# TRL's configs: compared only when the arguments have the field.
TRL_FIELDS: tuple[tuple[Loc, str, Callable[[Any], Any]], ...] = (
    (("training", "seq_len"), "max_length", lambda m: m.training.seq_len),
    (("training", "packing", "enabled"), "packing", lambda m: m.training.packing.enabled),
    (
        ("training", "objective", "beta"),
        "beta",
        lambda m: m.training.objective and m.training.objective.beta,
    ),
    (
        ("training", "objective", "loss_type"),
        "loss_type",
        lambda m: m.training.objective and m.training.objective.loss_type,
    ),
)

# Fields pinned outside the tables, by the manifest field that pins them.
OTHER_PINS: Mapping[str, Loc] = {
    "max_steps": ("training", "max_steps"),
    "num_train_epochs": ("training", "epochs"),
    "bf16": ("training", "precision"),
    "fp16": ("training", "precision"),
    "tf32": ("training", "precision"),
    "completion_only_loss": ("training", "loss_on"),
    "assistant_only_loss": ("training", "loss_on"),
    "full_determinism": ("seeds", "deterministic"),
}

# The objective a TRL config class names (trl.DPOConfig -> dpo).
PREFERENCE_WITH_BETA = ("dpo", "orpo", "kto", "cpo")


@dataclass
class RecipeCheck:
    """What the recipe comparison found (rows) and what it could not compare."""

    rows: list[Finding] = field(default_factory=list)
    not_compared: list[dict[str, str]] = field(default_factory=list)
    unpinned: dict[str, Any] = field(default_factory=dict)
    objective: str = "trainer"


# transformers 5 renamed gradient_checkpointing (kept as a deprecated alias).
ALIASES = {"gradient_checkpointing": "activation_checkpointing"}


def arg_name(name: str, fields: Any) -> str:
    """The name the installed TrainingArguments use for ``name`` (``fields``: a
    mapping or set of field names)."""
    new = ALIASES.get(name)
    return new if new is not None and new in fields else name


def effective_arguments(args: Any) -> tuple[dict[str, Any], str]:
    """``args`` as JSON-able data (enums by value, tokens redacted) and its sha256 digest."""
    data = args.to_dict() if hasattr(args, "to_dict") else dict(vars(args))
    data = json.loads(json.dumps(data, default=_plain, sort_keys=True))
    data["__class__"] = f"{type(args).__module__}.{type(args).__qualname__}"
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return data, "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _plain(value: Any) -> Any:
    inner = getattr(value, "value", None)  # an Enum
    return inner if isinstance(inner, (str, int, float, bool)) else str(value)


def objective_of(class_path: str) -> str:
    """``trl.trainer.dpo_config.DPOConfig`` -> ``dpo``; anything not TRL's -> ``trainer``."""
    module, _, name = class_path.rpartition(".")
    if not module.split(".")[0] == "trl" or not name.endswith("Config"):
        return "trainer"
    return name.removesuffix("Config").lower()


def observed_precision(data: Mapping[str, Any]) -> str:
    if data.get("bf16"):
        return "bf16"
    if data.get("fp16"):
        return "fp16"
    if data.get("tf32"):
        return "tf32"
    return "fp32"


def argument_defaults(args: Any) -> dict[str, Any]:
    """The defaults of ``args``'s class as effective data: an instance built with
    nothing but ``use_cpu`` (what ``__post_init__`` derives included), or the
    declared defaults when the class cannot be built so; empty for other objects.

    The instance never sets up devices (``TrainingArguments._setup_devices``
    resets accelerate's process-wide state, under the running Trainer), and
    the environment is left as it was."""
    if not dataclasses.is_dataclass(args):
        return {}
    names = {f.name for f in dataclasses.fields(args)}
    cls: Any = type(args)
    if "_setup_devices" in dir(cls):
        import torch  # loaded already: the arguments' class needs it

        cpu = property(lambda _self: torch.device("cpu"))
        cls = type(cls.__name__, (cls,), {"_setup_devices": cpu, "__module__": cls.__module__})
    before = dict(os.environ)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = cls(use_cpu=True) if "use_cpu" in names else cls()
        return effective_arguments(built)[0]
    except Exception:  # noqa: BLE001 - a class that needs more: its declared defaults
        out = {}
        for f in dataclasses.fields(args):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
        declared: dict[str, Any] = json.loads(json.dumps(out, default=_plain))
        return declared
    finally:
        for key in set(os.environ) - set(before):
            del os.environ[key]
        os.environ.update({k: v for k, v in before.items() if os.environ.get(k) != v})


def judge_arguments(
    manifest: Manifest,
    data: Mapping[str, Any],
    manifest_path: str,
    defaults: Mapping[str, Any] | None = None,
) -> RecipeCheck:
    """Every difference between the manifest and the effective arguments ``data``.

    A field the manifest leaves unpinned, that is not neutral
    (``options.NEUTRAL``) and whose value is not the class's default
    (``defaults``, from ``argument_defaults``) is refused and recorded in
    ``unpinned``."""
    check = RecipeCheck(objective=objective_of(str(data.get("__class__", ""))))
    compared: set[str] = set()
    pins: dict[str, Loc] = dict(OTHER_PINS)

    def row(loc: Loc, name: str, expected: Any, observed: Any, message: str = "") -> None:
        check.rows.append(
            Finding.at(
                loc,
                kind="drift",
                rule=RULE,
                message=message or f"the Trainer's {name} is not the manifest's",
                path=manifest_path,
                expected=_show(expected),
                observed=f"{_show(observed)} ({name})",
                hint=HINT,
            )
        )

    for loc, given, pinned in FIELDS:
        want = pinned(manifest)
        name = arg_name(given, data)
        pins.setdefault(name, loc)
        if name not in data or want is None:
            continue
        compared |= {name, given}  # a deprecated alias is the same setting
        if not _same(want, data[name]):
            row(loc, name, want, data[name])
    _steps(manifest, data, row)
    _precision(manifest, data, row, check)
    _objective(manifest, data, row, check)
    for loc, name, pinned in TRL_FIELDS:
        want = pinned(manifest)
        pins.setdefault(name, loc)
        if name not in data:
            continue
        if want is None:
            if name == "beta" and check.objective in PREFERENCE_WITH_BETA:
                compared.add(name)
                row(loc, name, "stated in the manifest", data[name],
                    f"the {check.objective} objective's beta is not pinned")  # fmt: skip
            continue
        compared.add(name)
        if not _same(want, data[name]):
            row(loc, name, want, data[name])
    _loss_on(manifest, data, row, check)
    _not_compared(manifest, data, check)
    compared |= _compared_elsewhere(manifest, data)
    check.rows += _pinned_options(manifest.training.options, data, manifest_path, pins)
    unpinned, check.unpinned = judge_unpinned(data, defaults or {}, compared, manifest_path, pins)
    check.rows += unpinned
    return check


def _compared_elsewhere(manifest: Manifest, data: Mapping[str, Any]) -> set[str]:
    """The fields the manifest pins outside the tables: steps, precision, loss_on,
    determinism (judged on torch itself), the objective's parameters, the options."""
    t = manifest.training
    out = {"full_determinism", *t.options}
    if t.max_steps is not None or t.epochs is not None:
        out |= {"max_steps", "num_train_epochs"}
    if t.precision is not None and t.precision != "fp8":
        out |= {"bf16", "fp16", "tf32"}
    if t.loss_on is not None and "completion_only_loss" in data:
        out |= {"completion_only_loss", "assistant_only_loss"}
    if t.objective is not None:
        out |= set(t.objective.params)
    return out


def _pinned_options(
    options: Mapping[str, Any], data: Mapping[str, Any], path: str, pins: Mapping[str, Loc]
) -> list[Finding]:
    """``training.options`` against the arguments: each value exactly, each name a field
    of the trainer's config that no other manifest field pins."""
    rows = []
    for name, want in sorted(options.items()):
        loc: Loc = ("training", "options", name)
        if name in pins:
            message, expected = f"{name} has its own manifest field", format_loc(pins[name])
            observed, hint = f"training.options.{name}", f"move it to {format_loc(pins[name])}"
        elif name not in data:
            message, expected = f"the trainer's config has no field {name}", _show(want)
            observed, hint = f"no such field in {data.get('__class__', 'the arguments')}", HINT
        elif not _same(want, data[name]):
            message, expected = f"the trainer's {name} is not the manifest's", _show(want)
            observed, hint = f"{_show(data[name])} ({name})", HINT
        else:
            continue
        rows.append(Finding.at(loc, kind="drift", rule=RULE, message=message, path=path,
                               expected=expected, observed=observed, hint=hint))  # fmt: skip
    return rows


def _steps(manifest: Manifest, data: Mapping[str, Any], row: Callable[..., None]) -> None:
    t = manifest.training
    steps = data.get("max_steps")
    if t.max_steps is not None:
        if steps != t.max_steps:
            row(("training", "max_steps"), "max_steps", t.max_steps, steps)
    elif t.epochs is not None:
        if isinstance(steps, int) and steps > 0:
            row(("training", "epochs"), "max_steps", f"{t.epochs} epochs (max_steps -1)", steps,
                "max_steps overrides the manifest's epochs")  # fmt: skip
        elif not _same(t.epochs, data.get("num_train_epochs")):
            row(("training", "epochs"), "num_train_epochs", t.epochs, data.get("num_train_epochs"))


def _precision(
    manifest: Manifest, data: Mapping[str, Any], row: Callable[..., None], check: RecipeCheck
) -> None:
    want = manifest.training.precision
    if want is None:
        return
    if want == "fp8":
        check.not_compared.append(
            {"field": "training.precision", "why": "fp8 has no TrainingArguments counterpart"}
        )
        return
    seen = observed_precision(data)
    if seen != want:
        flags = ", ".join(f"{k}={data.get(k)}" for k in ("bf16", "fp16", "tf32"))
        row(("training", "precision"), "bf16/fp16/tf32", want, f"{seen}: {flags}")


def _objective(
    manifest: Manifest, data: Mapping[str, Any], row: Callable[..., None], check: RecipeCheck
) -> None:
    declared = manifest.training.objective
    seen = check.objective
    loc: Loc = ("training", "objective", "kind")
    if declared is None:
        if seen not in ("trainer", "sft"):
            row(loc, "the trainer's config class", "absent: supervised next-token loss "
                "(trainer or sft)", seen, f"the run trains a {seen} objective the manifest "
                "does not state")  # fmt: skip
        return
    if declared.kind != seen:
        row(loc, "the trainer's config class", declared.kind, seen,
            f"the run trains {seen}, the manifest declares {declared.kind}")  # fmt: skip
    for key, want in sorted(declared.params.items()):
        ploc: Loc = ("training", "objective", "params", key)
        if key not in data:
            row(ploc, key, want, "no such field", f"the trainer's config has no field {key}")
        elif not _same(want, data[key]):
            row(ploc, key, want, data[key])


def _loss_on(
    manifest: Manifest, data: Mapping[str, Any], row: Callable[..., None], check: RecipeCheck
) -> None:
    want = manifest.training.loss_on
    if want is None or "completion_only_loss" not in data:
        return  # the plain Trainer: the first batch shows it (ftmanifest.integrations.batch)
    only = data.get("completion_only_loss")
    assistant = bool(data.get("assistant_only_loss"))
    loc: Loc = ("training", "loss_on")
    if want == "all" and (only or assistant):
        row(loc, "completion_only_loss/assistant_only_loss", "all",
            f"completion_only_loss={only}, assistant_only_loss={assistant}")  # fmt: skip
    if want == "completion" and only is False and not assistant:
        row(loc, "completion_only_loss", "completion", "all: completion_only_loss=False")


def _not_compared(manifest: Manifest, data: Mapping[str, Any], check: RecipeCheck) -> None:
    t = manifest.training
    if t.loss_normalization is not None:
        check.not_compared.append({
            "field": "training.loss_normalization",
            "why": "the Trainer normalises per token over the accumulated batch "
            "(num_items_in_batch); a compute_loss of its own is not visible",
        })  # fmt: skip
    if t.packing.mask_policy is not None:
        check.not_compared.append(
            {"field": "training.packing.mask_policy", "why": "no TrainingArguments counterpart"}
        )
    if _opt(manifest) is not None and _opt(manifest).state_precision != "fp32":
        check.not_compared.append({
            "field": "training.optimizer.state_precision",
            "why": "judged only through training.optimizer.name (e.g. adamw_bnb_8bit)",
        })  # fmt: skip
    if t.seq_len is not None and "max_length" not in data:
        check.not_compared.append({
            "field": "training.seq_len",
            "why": "transformers.Trainer has no max_length; the first batch's length is judged",
        })  # fmt: skip


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)
