"""Trainer options that change training: pinned and compared, or refused.

Layer: edges - edge (integrations), judging plain data (the arguments' ``to_dict``).
``TrainingArguments`` and TRL's configs have well over a hundred fields, and
a new release adds more.  Each field is one of three things here:

- compared: a manifest field pins it (``recipe.FIELDS``, the objective's
  parameters, or ``training.options``, a mapping of field name to value);
- neutral: it does not change the trained weights (logging, saving,
  evaluation, the hub, data-loader workers...): ``NEUTRAL``, an explicit list;
- anything else: at its default it passes; at another value it is refused
  (``drift.unpinned-option``), naming the field, the value and the fix.

So an option a new release adds is refused until someone decides it is
neutral: fail closed.  The defaults are the same class's own, built
(``recipe.argument_defaults``), so values its ``__post_init__`` derives are
compared like with like.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.location import Loc, format_loc

RULE = "drift.unpinned-option"

# Fields that do not change the trained weights.  Each entry is a decision:
# a field missing here is judged (refused when not at its default).
NEUTRAL: frozenset[str] = frozenset({
    # where and how the run reports, saves and evaluates
    "output_dir", "run_name", "project", "report_to", "disable_tqdm", "log_level",
    "log_level_replica", "log_on_each_node", "logging_strategy", "logging_steps",
    "logging_first_step", "logging_nan_inf_filter", "include_num_input_tokens_seen",
    "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id", "skip_memory_metrics",
    "eval_strategy", "eval_steps", "eval_delay", "per_device_eval_batch_size",
    "prediction_loss_only", "eval_on_start", "eval_do_concat_batches", "eval_use_gather_object",
    "eval_accumulation_steps", "include_for_metrics", "batch_eval_metrics", "bf16_full_eval",
    "fp16_full_eval", "eval_packing", "metric_for_best_model", "greater_is_better",
    "save_strategy", "save_steps", "save_on_each_node", "save_total_limit", "save_only_model",
    "enable_jit_checkpoint", "restore_callback_states_from_checkpoint",
    "push_to_hub", "hub_token", "hub_private_repo", "hub_model_id", "hub_strategy",
    "hub_always_push", "hub_revision", "do_train", "do_eval", "do_predict", "debug",
    # where it runs and how data reaches it (the batches are judged themselves)
    "use_cpu", "local_rank", "dataloader_num_workers", "dataloader_pin_memory",
    "dataloader_persistent_workers", "dataloader_prefetch_factor",
    "dataloader_multiprocessing_context", "remove_unused_columns", "length_column_name",
    "dataset_num_proc", "torch_empty_cache_steps", "use_cache", "pad_to_multiple_of",
    "activation_offloading", "activation_checkpointing_kwargs", "gradient_checkpointing_kwargs",
    "precompute_ref_log_probs", "precompute_ref_batch_size", "trust_remote_code",
    # a script's own bookkeeping: the Trainer reads train(resume_from_checkpoint=...)
    "resume_from_checkpoint",
    # the job's layout: judged against the manifest's distributed section
    "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers",
    "ddp_static_graph", "ddp_backend", "ddp_timeout", "fsdp", "fsdp_config", "deepspeed",
    "parallelism_config",
})  # fmt: skip


def same(want: Any, seen: Any) -> bool:
    """Equal as the guard compares pinned and observed values: bools strictly,
    numbers to 1e-9 relative, TRL's one-element loss_type lists as their string."""
    if isinstance(want, bool) or isinstance(seen, bool):
        return bool(want) is bool(seen) and type(want) is type(seen)
    if isinstance(want, (int, float)) and isinstance(seen, (int, float)):
        return math.isclose(float(want), float(seen), rel_tol=1e-9, abs_tol=0.0)
    if isinstance(want, str) and isinstance(seen, list) and len(seen) == 1:
        return want == seen[0]  # TRL's loss_type: "sigmoid" and ["sigmoid"]
    if isinstance(want, list) and isinstance(seen, str):
        return want == [seen]
    return bool(want == seen)


def _normal(value: Any) -> Any:
    """``accelerator_config`` loses ``use_configured_state`` once devices are set up."""
    if isinstance(value, dict) and "use_configured_state" in value:
        return {k: v for k, v in value.items() if k != "use_configured_state"}
    return value


def _hint(name: str, value: Any, default: Any, pin: Loc | None) -> str:
    shown = json.dumps(value, default=str)
    where = (
        f"pin it as {format_loc(pin)} in the manifest"
        if pin is not None
        else f"pin it in the manifest's training section (options: {{{name}: {shown}}})"
    )
    return f"{where} and re-sign, or leave {name} at its default ({json.dumps(default)})"


def judge_unpinned(
    data: Mapping[str, Any],
    defaults: Mapping[str, Any],
    compared: set[str],
    path: str,
    pins: Mapping[str, Loc],
) -> tuple[list[Finding], dict[str, Any]]:
    """Rows for every field neither compared nor neutral that is not at its default,
    and those fields' values.  ``pins``: the manifest field that would pin a name."""
    rows, seen = [], {}
    for name in sorted(data):
        if name.startswith("__") or name in compared or name in NEUTRAL or name not in defaults:
            continue
        value, default = _normal(data[name]), _normal(defaults[name])
        if same(default, value):
            continue
        seen[name] = value
        pin = pins.get(name)
        rows.append(
            Finding.at(
                pin or ("training", "options", name),
                kind="drift",
                rule=RULE,
                message=f"the trainer's {name} changes training and the manifest does not pin it",
                path=path,
                expected=f"pinned in the manifest, or the default {json.dumps(default)}",
                observed=f"{json.dumps(value, default=str)} ({name})",
                hint=_hint(name, value, default, pin),
            )
        )
    return rows, seen
