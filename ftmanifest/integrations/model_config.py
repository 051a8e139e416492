"""The model as it will compute: its loaded config against the pinned ``config.json``.

Layer: edge (integrations; transformers imported inside the functions).  The
pinned weights with another ``rms_norm_eps``, activation, rope, attention
kernel or dtype are another computation.  ``judge_config`` compares the
loaded model's config with the one transformers builds from the pinned
snapshot's files, field by field: every field but the few that do not change
what is computed (``IGNORED``); the attention implementation against
``model.attn_implementation`` when pinned; the parameters' dtype against
``training.precision``.  ``refuse_overrides`` is ``load_pinned``'s check that
no keyword replaces a pinned config field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ftmanifest.errors import UsageError
from ftmanifest.findings import Finding

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
    "fp8": ("float32", "bfloat16", "float16"),
}
# load_pinned keywords that change no config field.
LOADING_KEYWORDS = frozenset({
    "device_map", "low_cpu_mem_usage", "max_memory", "offload_folder", "offload_state_dict",
    "use_safetensors", "weights_only", "key_mapping", "tp_plan", "tp_size", "device_mesh",
})  # fmt: skip


def pinned_config(folder: Path) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(folder), local_files_only=True)


def judge_config(model: Any, folder: Path, manifest: Any, path: str) -> list[Finding]:
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
    rows = []
    for key in sorted((set(want) | set(seen)) - IGNORED):
        if _canon(want.get(key)) != _canon(seen.get(key)):
            rows.append(_row(path, ("model", "config", key),
                             f"the loaded model's {key} is not the pinned config's",
                             _show(want.get(key, "(absent)")),
                             _show(seen.get(key, "(absent)"))))  # fmt: skip
    kernel = getattr(config, "_attn_implementation", None)
    pinned_kernel = manifest.model.attn_implementation
    if pinned_kernel is not None and kernel != pinned_kernel:
        rows.append(_row(path, ("model", "attn_implementation"),
                         "the model computes attention with another kernel", pinned_kernel,
                         str(kernel)))  # fmt: skip
    rows += _dtypes(model, manifest, path)
    return rows


def _dtypes(model: Any, manifest: Any, path: str) -> list[Finding]:
    precision = manifest.training.precision
    if precision is None:
        return []
    allowed = PRECISION_DTYPES[precision]
    seen = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()
                   if p.is_floating_point() and p.requires_grad})  # fmt: skip
    wrong = [d for d in seen if d not in allowed]
    if not wrong:
        return []
    return [
        _row(
            path,
            ("training", "precision"),
            f"trained parameters are {', '.join(wrong)} under precision {precision}",
            f"trainable parameters in {' or '.join(allowed)}",
            ", ".join(seen),
            hint="load with dtype matching training.precision (load_pinned chooses it)",
        )
    ]


def refuse_overrides(kwargs: dict[str, Any], folder: Path, manifest: Any) -> dict[str, Any]:
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
    pinned_kernel = manifest.model.attn_implementation
    asked = out.get("attn_implementation")
    if pinned_kernel is not None:
        if asked is not None and asked != pinned_kernel:
            raise UsageError(
                "load_pinned refuses another attention kernel than the pinned one",
                field="model.attn_implementation",
                expected=pinned_kernel,
                observed=f"attn_implementation={asked!r}",
                hint="drop it (load_pinned passes the pinned kernel), or change the manifest",
            )
        out["attn_implementation"] = pinned_kernel
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
