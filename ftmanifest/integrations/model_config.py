"""The model as it will compute: its loaded config against the pinned ``config.json``.

Layer: edges - edge (integrations; transformers imported inside the functions).  The
pinned weights with another ``rms_norm_eps``, activation, rope, attention
kernel or dtype are another computation.  ``judge_config`` compares the
loaded model's config with the one transformers builds from the pinned
snapshot's files, field by field: every field but the few that do not change
what is computed (``IGNORED``); the attention implementation against
``model.attn_implementation`` when pinned; the parameters' dtype against
``training.precision``.  ``judge_modules`` then compares the modules
themselves with the ones transformers builds from the pinned config (on the
meta device: no memory), so a module swapped or changed after loading (an
RMSNorm's ``variance_epsilon``, another activation class, an attention's
``scaling``) is another computation even when ``model.config`` still reads
as pinned.  ``refuse_overrides`` is ``load_pinned``'s check that no keyword
replaces a pinned config field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ftmanifest.errors import UsageError
from ftmanifest.findings import Finding
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest.model import Manifest

RULE = "drift.model-config"
# Config fields that do not change the forward or backward pass.
IGNORED = frozenset({
    "_name_or_path", "transformers_version", "_commit_hash", "use_cache", "dtype",
    "torch_dtype", "output_attentions", "output_hidden_states", "return_dict",
    "_attn_implementation_autoset", "_attn_implementation_internal",
})  # fmt: skip
# The parameter dtypes each precision trains with (master weights may stay fp32).
PRECISION_DTYPES = {
    "fp32": ("float32",),
    "tf32": ("float32",),
    "bf16": ("float32", "bfloat16"),
    "fp16": ("float32", "float16"),
    "fp8": ("float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"),
}
# load_pinned keywords that change no config field.
LOADING_KEYWORDS = frozenset({
    "device_map", "low_cpu_mem_usage", "max_memory", "offload_folder", "offload_state_dict",
    "use_safetensors", "weights_only", "key_mapping", "tp_plan", "tp_size", "device_mesh",
})  # fmt: skip


def pinned_config(folder: Path) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(folder), local_files_only=True)


def judge_config(model: Any, folder: Path, manifest: Manifest, path: str) -> list[Finding]:
    """One row per config field of ``model`` that differs from the pinned snapshot's."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        return [_row(path, ("model",), "the model has no transformers config to compare",
                     "a PreTrainedModel", type(model).__name__)]  # fmt: skip
    try:
        want = pinned_config(folder).to_dict()
    except Exception as exc:  # noqa: BLE001 - unreadable pinned config: refused, never passed
        return [
            _row(
                path,
                ("model", "files"),
                "the pinned config cannot be read",
                "config.json transformers can load",
                f"{type(exc).__name__}: {exc}"[:300],
            )
        ]
    seen = config.to_dict()
    replication = getattr(manifest.method, "layer_replication", None)
    if replication:  # peft's declared layer_replication stacks copies of the pinned layers
        want["num_hidden_layers"] = sum(end - start for start, end in replication)
    rows = []
    for key in sorted((set(want) | set(seen)) - IGNORED):
        if _canon(want.get(key)) != _canon(seen.get(key)):
            rows.append(_row(path, ("model", "config", key),
                             f"the loaded model's {key} is not the pinned config's",
                             _show(want.get(key, "(absent)")),
                             _show(seen.get(key, "(absent)"))))  # fmt: skip
    rows += _kernels(model, manifest, path)
    rows += _dtypes(model, manifest, path)
    if not rows and not replication:  # a config row already refuses; replicated layers
        rows += judge_modules(model, folder, path)  # are not what the pinned config builds
    return rows


# Module attributes that are run-time state, not computation: the train/eval
# switch, checkpointing, where it was loaded from, and a dynamic rope's cache
# length (it grows with the longest sequence seen).
STATE_ATTRIBUTES = frozenset(
    {"training", "gradient_checkpointing", "name_or_path", "max_seq_len_cached"}
)
# Name segments wrappers insert between a module and its parent (peft, FSDP1,
# activation checkpointing): the wrapped module is compared under the name
# without them.
WRAPPER_SEGMENTS = ("base_layer", "original_module", "_fsdp_wrapped_module",
                    "_checkpoint_wrapped_module", "_orig_mod")  # fmt: skip
MAX_MODULE_ROWS = 20


def module_facts(model: Any) -> dict[str, tuple[type, dict[str, Any]]]:
    """``{name: (class, facts)}`` of every module a forward pass runs, wrappers'
    own modules (peft's adapters, FSDP's shells) left out and their name
    segments stripped: the class and every public scalar attribute."""
    out: dict[str, tuple[type, dict[str, Any]]] = {}
    for name, module in model.named_modules():
        parts = name.split(".") if name else []
        if _adapter_part(parts) or _is_wrapper(module):
            continue
        key = ".".join(p for p in parts if p not in WRAPPER_SEGMENTS)
        scalars = {
            k: v
            for k, v in sorted(vars(module).items())
            if not k.startswith("_")
            and k not in STATE_ATTRIBUTES
            and isinstance(v, (bool, int, float, str, type(None)))
        }
        out[key] = (type(module), scalars)
    return out


def _adapter_part(parts: list[str]) -> bool:
    """Inside an adapter peft added (``lora_A``, ``modules_to_save``, prompt encoders)."""
    return any(
        p.startswith(("lora_", "ia3_", "hada_", "lokr_", "oft_", "boft_", "vera_"))
        or p in ("modules_to_save", "prompt_encoder", "word_embeddings_adapter")
        for p in parts
    )


def _is_wrapper(module: Any) -> bool:
    """peft's tuner layers (their wrapped layer is compared) and FSDP1's shell."""
    origin = type(module).__module__
    if origin.startswith("peft."):
        return True
    return type(module).__name__ in ("FullyShardedDataParallel", "CheckpointWrapper")


def _same_class(seen: type, want: type) -> bool:
    """The class, or a subclass torch's FSDP2 made of it (``FSDPLlamaDecoderLayer``)."""
    if seen is want:
        return True
    return want in seen.__mro__ and seen.__module__.startswith("torch.distributed")


def judge_modules(model: Any, folder: Path, path: str) -> list[Finding]:
    """One row per module of ``model`` that is not what the pinned config builds."""
    try:
        import torch

        config = pinned_config(folder)
        kernel = getattr(getattr(model, "config", None), "_attn_implementation", None)
        if kernel is not None:
            config._attn_implementation = kernel  # judged on its own (attn_implementation)
        with torch.device("meta"):
            reference = type(model)._from_config(config)
    except Exception as exc:  # noqa: BLE001 - the reference cannot be built: refused, not passed
        return [_row(path, ("model", "config"), "the pinned model cannot be built to compare "
                     "the loaded modules with", f"{type(model).__name__} from the pinned "
                     "config.json", f"{type(exc).__name__}: {exc}"[:300])]  # fmt: skip
    want, seen = module_facts(reference), module_facts(model)
    rows = []
    for name in sorted(set(want) | set(seen)):
        shown = name or "(the model)"
        loc = ("model", "modules", name) if name else ("model", "modules")
        if name not in seen:
            rows.append(_row(path, loc, f"the loaded model lacks module {shown}",
                             _class(want[name][0]), "(absent)"))  # fmt: skip
        elif name not in want:
            rows.append(_row(path, loc, f"the loaded model has a module the pinned one has not: "
                             f"{shown}", "(absent)", _class(seen[name][0])))  # fmt: skip
        elif not _same_class(seen[name][0], want[name][0]):
            rows.append(_row(path, loc, f"module {shown} is another class than the pinned "
                             "model's", _class(want[name][0]), _class(seen[name][0])))  # fmt: skip
        elif seen[name][1] != want[name][1]:
            a, b = want[name][1], seen[name][1]
            keys = sorted(k for k in set(a) | set(b) if a.get(k, _ABSENT) != b.get(k, _ABSENT))
            rows.append(_row(path, loc, f"module {shown} computes with other settings than "
                             "the pinned model's", _pairs(a, keys), _pairs(b, keys)))  # fmt: skip
        if len(rows) == MAX_MODULE_ROWS:
            break
    return rows


_ABSENT = "(absent)"


def _pairs(values: dict[str, Any], keys: list[str]) -> str:
    return ", ".join(f"{k}={values.get(k, _ABSENT)!r}" for k in keys)


def _class(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _dtypes(model: Any, manifest: Manifest, path: str) -> list[Finding]:
    precision = manifest.training.precision
    if precision is None:
        return []
    allowed = PRECISION_DTYPES[precision]
    # Every floating parameter, frozen ones too: a LoRA trains fp32 adapters over a
    # base whose forward pass runs in the base's dtype.
    seen: dict[str, list[str]] = {}
    for name, p in model.named_parameters():
        if p.is_floating_point():
            seen.setdefault(str(p.dtype).removeprefix("torch."), []).append(name)
    wrong = sorted(d for d in seen if d not in allowed)
    if not wrong:
        return []
    example = seen[wrong[0]][0]
    return [
        _row(
            path,
            ("training", "precision"),
            f"parameters are {', '.join(wrong)} under precision {precision} (e.g. {example})",
            f"parameters in {' or '.join(allowed)}",
            ", ".join(f"{d} ({len(seen[d])} parameters)" for d in sorted(seen)),
            hint="load the base with load_pinned(MANIFEST) (it refuses another dtype) and cast "
            "nothing after loading, or change training.precision and re-sign",
        )
    ]


def pinned_kernels(manifest: Manifest) -> list[tuple[Loc, str]]:
    """Where the manifest pins the attention kernel, and to what: ``model.attn_implementation``
    and ``environment.attn_implementation`` (both, when both are given)."""
    env = manifest.environment.attn_implementation if manifest.environment else None
    pins: list[tuple[Loc, str | None]] = [
        (("model", "attn_implementation"), manifest.model.attn_implementation),
        (("environment", "attn_implementation"), env),
    ]
    return [(loc, kernel) for loc, kernel in pins if kernel is not None]


def effective_kernels(model: Any) -> dict[str, str | None]:
    """``{where: kernel}``: the attention implementation the model's config and each of
    its sub-configs (a vision tower, a text model) dispatch to at forward time."""
    config = getattr(model, "config", None)
    out = {"model.config": getattr(config, "_attn_implementation", None)}
    for name in getattr(config, "sub_configs", None) or {}:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "_attn_implementation"):
            out[f"model.config.{name}"] = sub._attn_implementation
    return out


def _kernels(model: Any, manifest: Manifest, path: str) -> list[Finding]:
    rows = []
    seen = effective_kernels(model)
    for loc, pinned in pinned_kernels(manifest):
        other = {where: k for where, k in seen.items() if k != pinned}
        if other:
            observed = ", ".join(f"{k} ({at}._attn_implementation)" for at, k in other.items())
            rows.append(_row(path, loc, "the model computes attention with another kernel than "
                             "the pinned one", pinned, observed,
                             hint="load the model with load_pinned(MANIFEST) (it passes the "
                             "pinned kernel) and do not switch it after loading, or change "
                             f"{format_loc(loc)} and re-sign"))  # fmt: skip
    return rows


def refuse_overrides(kwargs: dict[str, Any], folder: Path, manifest: Manifest) -> dict[str, Any]:
    """``from_pretrained``'s keywords, the pinned kernel added; replacing a pinned field refused."""
    if "config" in kwargs:
        raise UsageError(
            "load_pinned builds the config from the pinned snapshot",
            field="config",
            expected="not given",
            observed=f"config={type(kwargs['config']).__name__}",
            hint="drop it; to train another configuration, change the snapshot and re-lock",
        )
    fields = set(pinned_config(folder).to_dict()) - IGNORED
    replaced = sorted(k for k in kwargs if k in fields and k not in LOADING_KEYWORDS)
    if replaced:
        raise UsageError(
            f"load_pinned refuses to replace pinned config fields: {', '.join(replaced)}",
            field=f"model.config.{replaced[0]}",
            expected="the pinned config.json's value",
            observed=", ".join(f"{k}={kwargs[k]!r}" for k in replaced),
            hint="drop it; a changed config is another model: change the snapshot and re-lock",
        )
    out = dict(kwargs)
    asked = out.get("attn_implementation")
    for loc, pinned_kernel in pinned_kernels(manifest):
        if asked is not None and asked != pinned_kernel:
            raise UsageError(
                "load_pinned refuses another attention kernel than the pinned one",
                field=format_loc(loc),
                expected=pinned_kernel,
                observed=f"attn_implementation={asked!r}",
                hint="drop it (load_pinned passes the pinned kernel), or change the manifest",
            )
        asked = out["attn_implementation"] = pinned_kernel
    dtype = out.get("dtype", out.get("torch_dtype"))
    precision = manifest.training.precision
    if dtype is not None and precision is not None:
        name = str(dtype).removeprefix("torch.")
        if name not in PRECISION_DTYPES[precision] and name != "auto":
            raise UsageError(
                f"load_pinned refuses dtype {name} under training.precision {precision}",
                field="training.precision",
                expected=" or ".join(PRECISION_DTYPES[precision]),
                observed=f"dtype={dtype!r}",
                hint="drop dtype, or change training.precision and re-sign",
            )
    return out


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def _row(path: str, loc: Any, message: str, expected: Any, observed: Any,
         hint: str | None = None) -> Finding:  # fmt: skip
    return Finding.at(
        loc, kind="drift", rule=RULE, message=message, path=path, expected=str(expected),
        observed=str(observed),
        hint=hint or "load the model with ftmanifest.integrations.transformers.load_pinned("
        "MANIFEST) and pass no config overrides",
    )  # fmt: skip
