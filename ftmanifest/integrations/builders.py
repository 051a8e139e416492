"""Type it once: TrainingArguments, TRL configs and peft's LoraConfig from the manifest.

Layer: edges - edge (integrations; transformers, trl and peft imported inside the
functions).  The builders read the same table the Trainer guard compares
(``ftmanifest.integrations.recipe.FIELDS``), so what they build passes the
guard; a keyword that would replace a pinned value with another is refused
when the object is built (``UsageError`` naming the manifest field), while
everything the manifest does not pin (``output_dir``, logging, saving...)
passes through.

    args = training_arguments("manifest.yaml", output_dir="out")
    config = sft_config("manifest.yaml", output_dir="out")      # TRL installed
    peft_model = get_peft_model(model, lora_config("manifest.yaml"))
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.errors import UsageError
from ftmanifest.integrations.recipe import FIELDS, TRL_FIELDS, arg_name
from ftmanifest.location import Loc, format_loc

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest
    from ftmanifest.manifest.model import Manifest


def manifest_model(manifest: LoadedManifest | Manifest | str | Path) -> Manifest:
    """The ``Manifest`` model of ``manifest``: a model, a loaded manifest or a path."""
    from ftmanifest.manifest import LoadedManifest, load_manifest
    from ftmanifest.manifest.model import Manifest

    if isinstance(manifest, Manifest):
        return manifest
    if isinstance(manifest, LoadedManifest):
        return manifest.manifest
    return load_manifest(Path(manifest)).manifest


def pinned_arguments(
    manifest: LoadedManifest | Manifest | str | Path, fields: set[str], *, trl: bool = False
) -> dict[str, Any]:
    """``{argument: (value, manifest location)}`` of every pinned value ``fields`` can take."""
    m = manifest_model(manifest)
    out: dict[str, tuple[Any, Loc]] = {}

    def put(name: str, value: Any, loc: Loc) -> None:
        name = arg_name(name, fields)
        if value is None or name not in fields:
            return
        if name in out and out[name][0] != value:
            raise UsageError(
                f"the Trainer takes one {name}; the manifest pins two",
                field=format_loc(loc),
                expected=f"{out[name][0]!r} (as {format_loc(out[name][1])})",
                observed=repr(value),
                hint="set every seed the Trainer draws from one args.seed to the same value",
            )
        out.setdefault(name, (value, loc))

    for loc, name, pinned in FIELDS + (TRL_FIELDS if trl else ()):
        put(name, pinned(m), loc)
    t = m.training
    if t.max_steps is not None:
        put("max_steps", t.max_steps, ("training", "max_steps"))
    elif t.epochs is not None:
        put("num_train_epochs", t.epochs, ("training", "epochs"))
        put("max_steps", -1, ("training", "epochs"))
    if t.precision is not None and t.precision != "fp8":
        for flag in ("bf16", "fp16"):
            put(flag, t.precision == flag, ("training", "precision"))
        if t.precision == "tf32":
            put("tf32", True, ("training", "precision"))
    put("full_determinism", m.seeds.deterministic, ("seeds", "deterministic"))
    if trl and t.loss_on is not None and "completion_only_loss" in fields:
        put("completion_only_loss", t.loss_on == "completion", ("training", "loss_on"))
        if t.loss_on == "all":
            put("assistant_only_loss", False, ("training", "loss_on"))
    if trl and t.objective is not None:
        for key, value in t.objective.params.items():
            put(key, value, ("training", "objective", "params", key))
    for key, value in t.options.items():
        put(key, value, ("training", "options", key))
    return {k: v for k, v in out.items()}


def _build(
    cls: Any,
    manifest: LoadedManifest | Manifest | str | Path,
    overrides: dict[str, Any],
    *,
    trl: bool,
) -> Any:
    fields = {f.name for f in dataclasses.fields(cls)}
    pinned = pinned_arguments(manifest, fields, trl=trl)
    _refuse_overrides(overrides, pinned, lambda key: arg_name(key, fields))
    kwargs = {name: value for name, (value, _loc) in pinned.items()}
    m = manifest_model(manifest)
    backend = m.environment.backend.kind if m.environment.backend else None
    if backend == "cpu" and "use_cpu" in fields:
        kwargs["use_cpu"] = True
    kwargs.update(overrides)
    return cls(**kwargs)


def _refuse_overrides(
    overrides: dict[str, Any], pinned: dict[str, tuple[Any, Loc]], name: Any
) -> None:
    """``UsageError`` for the first keyword that replaces a pinned value with another."""
    for key, value in overrides.items():
        if name(key) in pinned and not _equal(pinned[name(key)][0], value):
            want, loc = pinned[name(key)]
            raise UsageError(
                f"{key}= overrides a value the manifest pins",
                field=format_loc(loc),
                expected=repr(want),
                observed=f"{key}={value!r}",
                hint="drop the keyword, or change the manifest (and re-sign it)",
            )


def _equal(a: Any, b: Any) -> bool:
    value = getattr(b, "value", b)  # an Enum given for a string
    if isinstance(a, float) or isinstance(value, float):
        return isinstance(value, (int, float)) and float(a) == float(value)
    if isinstance(a, str) and isinstance(value, list):
        return [a] == value
    return bool(a == value)


def training_arguments(manifest: LoadedManifest | Manifest | str | Path, **overrides: Any) -> Any:
    """``transformers.TrainingArguments`` with every pinned value of ``manifest``."""
    from transformers import TrainingArguments

    return _build(TrainingArguments, manifest, overrides, trl=False)


def sft_config(manifest: LoadedManifest | Manifest | str | Path, **overrides: Any) -> Any:
    """``trl.SFTConfig``: the training arguments plus max_length, packing and the loss mask."""
    from trl import SFTConfig

    return _build(SFTConfig, manifest, overrides, trl=True)


def dpo_config(manifest: LoadedManifest | Manifest | str | Path, **overrides: Any) -> Any:
    """``trl.DPOConfig``: the training arguments plus max_length, beta and loss_type."""
    from trl import DPOConfig

    return _build(DPOConfig, manifest, overrides, trl=True)


def lora_config(manifest: LoadedManifest | Manifest | str | Path, **overrides: Any) -> Any:
    """``peft.LoraConfig`` (or the declared PEFT method's config) from ``method``."""
    m = manifest_model(manifest)
    method = m.method
    if method is None or method.kind == "full":
        raise UsageError(
            "the manifest trains no adapter",
            field="method.kind",
            expected="lora or peft",
            observed="absent" if method is None else method.kind,
            hint="declare method.kind: lora (r, alpha, target_modules) to train an adapter",
        )
    if method.kind == "peft":
        from peft import get_peft_config

        return get_peft_config({"peft_type": method.peft_type, **method.config, **overrides})
    from peft import LoraConfig

    pinned: dict[str, tuple[Any, Loc]] = {
        "r": (method.r, ("method", "r")),
        "lora_alpha": (method.alpha, ("method", "alpha")),
        "lora_dropout": (method.dropout, ("method", "dropout")),
        "target_modules": (method.target_modules, ("method", "target_modules")),
        "exclude_modules": (method.exclude_modules, ("method", "exclude_modules")),
        "modules_to_save": (method.modules_to_save or None, ("method", "modules_to_save")),
        "bias": (method.bias, ("method", "bias")),
        "use_rslora": (method.use_rslora, ("method", "use_rslora")),
        "use_dora": (method.use_dora, ("method", "use_dora")),
        "rank_pattern": (dict(method.rank_pattern), ("method", "rank_pattern")),
        "alpha_pattern": (dict(method.alpha_pattern), ("method", "alpha_pattern")),
        "init_lora_weights": (method.init, ("method", "init")),
        "layer_replication": (
            [tuple(r) for r in method.layer_replication] if method.layer_replication else None,
            ("method", "layer_replication"),
        ),
        "fan_in_fan_out": (method.fan_in_fan_out, ("method", "fan_in_fan_out")),
    }
    _refuse_overrides(overrides, pinned, lambda key: key)
    kwargs = {k: v for k, (v, _loc) in pinned.items() if v is not None}
    kwargs.setdefault("task_type", "CAUSAL_LM")
    kwargs.update(overrides)
    return LoraConfig(**kwargs)
