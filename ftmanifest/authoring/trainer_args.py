"""Source: a TrainingArguments / SFTConfig / DPOConfig JSON (``args.to_json_string()``).

Layer: edges - authoring (reads one JSON file).  The keys are the dataclass fields of
transformers' ``TrainingArguments`` (5.x, with the 4.x names it dropped),
TRL's ``SFTConfig`` and ``DPOConfig`` (1.x, with older names such as
``max_seq_length``: ``keys``), read from the installed sources; a test checks the lists
still hold every field of what is installed.  ``training_args.bin`` is a
pickle (``torch.save(args)``): it is refused, never unpickled.  LLaMA-Factory
takes the same keys, so ``apply`` is shared with its reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.authoring import keys
from ftmanifest.authoring.defaults import OPTIM_FILL, Default
from ftmanifest.authoring.draft import Draft, is_set
from ftmanifest.authoring.formats import find, read_mapping

KNOWN = keys.TRAINING_ARGUMENTS | keys.TRAINING_ARGUMENTS_4 | keys.SFT_CONFIG | keys.DPO_CONFIG

# Keys that change how a run is logged, saved, evaluated or fed, not what one
# optimizer step computes: not carried, and no note.
BOOKKEEPING = frozenset(
    """
output_dir overwrite_output_dir logging_strategy logging_steps logging_first_step log_on_each_node
logging_nan_inf_filter include_num_input_tokens_seen log_level log_level_replica disable_tqdm
report_to run_name project trackio_space_id trackio_bucket_id trackio_static_space_id logging_dir
eval_strategy evaluation_strategy eval_steps eval_delay per_device_eval_batch_size
prediction_loss_only eval_on_start eval_do_concat_batches eval_use_gather_object
eval_accumulation_steps include_for_metrics include_inputs_for_metrics batch_eval_metrics
save_only_model save_strategy save_steps save_on_each_node save_total_limit save_safetensors
enable_jit_checkpoint push_to_hub hub_token hub_private_repo hub_model_id hub_strategy
hub_always_push hub_revision push_to_hub_model_id push_to_hub_organization push_to_hub_token
load_best_model_at_end metric_for_best_model greater_is_better ignore_data_skip
restore_callback_states_from_checkpoint dataloader_drop_last dataloader_num_workers
dataloader_pin_memory dataloader_persistent_workers dataloader_prefetch_factor
dataloader_multiprocessing_context debug skip_memory_metrics do_train do_eval do_predict
resume_from_checkpoint local_rank _n_gpu use_cpu no_cuda ddp_timeout ddp_backend
ddp_find_unused_parameters ddp_bucket_cap_mb ddp_broadcast_buffers ddp_static_graph tpu_num_cores
tpu_metrics_debug past_index mp_parameters ray_scope torch_empty_cache_steps
per_gpu_eval_batch_size bf16_full_eval fp16_full_eval dataset_num_proc dataset_kwargs
dataset_batch_size use_cache use_legacy_prediction_loop include_tokens_per_second
generate_during_eval precompute_ref_batch_size length_column_name label_names
remove_unused_columns fp16_opt_level half_precision_backend fp16_backend
""".split()
)

MAPPED = frozenset(
    """
seed data_seed full_determinism per_device_train_batch_size per_gpu_train_batch_size
gradient_accumulation_steps max_grad_norm bf16 fp16 tf32 gradient_checkpointing
activation_checkpointing max_steps num_train_epochs optim learning_rate weight_decay
lr_scheduler_type warmup_steps adam_beta1 adam_beta2 adam_epsilon fsdp max_length max_seq_length
packing completion_only_loss assistant_only_loss beta loss_type label_smoothing
""".split()
)


def objective_of(cfg: dict[str, Any]) -> str:
    """Which TRL config wrote these keys: dpo, sft, or a plain Trainer's arguments."""
    if "beta" in cfg and ("precompute_ref_log_probs" in cfg or "reference_free" in cfg):
        return "dpo"
    if {"dataset_text_field", "completion_only_loss", "max_seq_length"} & cfg.keys():
        return "sft"
    return "trainer"


def read(path: Path, base: Path, draft: Draft) -> None:
    """Read a ``to_json_string()`` file into ``draft``."""
    cfg = read_mapping(path, "TrainingArguments JSON")
    source = path.name
    kind = objective_of(cfg)
    what = {"dpo": "DPOConfig", "sft": "SFTConfig"}.get(kind, "TrainingArguments")
    mapped = apply(cfg, source, draft, kind=kind)
    deepspeed(cfg.get("deepspeed"), path, source, draft)
    draft.unknown_keys(source, what, sorted(k for k in cfg if k not in KNOWN))
    draft.not_carried(
        source,
        sorted(k for k in cfg if k in KNOWN and k not in mapped | BOOKKEEPING and _differs(cfg, k)),
    )
    if is_set(cfg.get("output_dir")):
        draft.put(("export", "path"), str(cfg["output_dir"]), source, "output_dir")


def _differs(cfg: dict[str, Any], key: str) -> bool:
    """Worth a note: a value set (a JSON dump states every field, mostly empty)."""
    return is_set(cfg.get(key)) and key not in _DEFAULT_ON


_DEFAULT_ON = frozenset({"dataloader_in_order", "average_tokens_across_devices", "shuffle_dataset"})


def apply(
    cfg: dict[str, Any],
    source: str,
    draft: Draft,
    *,
    kind: str = "trainer",
    defaults: dict[str, Default] | None = None,
    tool: str = "transformers",
) -> set[str]:
    """Put what TrainingArguments-style keys say; the keys it used.

    ``defaults``: what the tool runs with for a key the config leaves out (a
    YAML config states only what it changes; a ``to_json_string()`` dump
    states every field), each written as "default of <tool> <file> <key>".
    """
    table = defaults or {}
    view = {**{k: d.value for k, d in table.items()}, **cfg}
    used: set[str] = set()

    def put(loc: tuple[str, ...], key: str, value: Any = None) -> None:
        if key in cfg:
            used.add(key)
            draft.put(loc, cfg[key] if value is None else value, source, key)
        elif key in table:
            d = table[key]
            draft.put_default(loc, d.value if value is None else value, d.tool, d.where)

    # A value of the wrong kind is put as it is: the schema check refuses it, naming the key.
    if view.get("seed") is not None:
        for name in ("python", "numpy", "torch"):
            put(("seeds", name), "seed")
        if view.get("data_seed") is not None:
            put(("seeds", "data_order"), "data_seed")
        else:
            put(("seeds", "data_order"), "seed")  # the Trainer's sampler uses seed then
    if view.get("full_determinism") is not None:
        put(("seeds", "deterministic"), "full_determinism", bool(view["full_determinism"]))
    for key in ("per_device_train_batch_size", "per_gpu_train_batch_size"):
        if view.get(key) is not None:
            put(("training", "micro_batch"), key)
            break
    if view.get("gradient_accumulation_steps") is not None:
        put(("training", "grad_accum"), "gradient_accumulation_steps")
    if view.get("max_grad_norm") is not None:
        put(("training", "max_grad_norm"), "max_grad_norm", _float(view["max_grad_norm"]))
    _precision(view, put, used)
    for key in ("gradient_checkpointing", "activation_checkpointing"):
        if isinstance(view.get(key), bool):
            put(("training", "activation_checkpointing"), key)
    if view.get("max_steps") not in (None, -1, 0):  # -1: unset (num_train_epochs counts)
        put(("training", "max_steps"), "max_steps")
    elif view.get("num_train_epochs") is not None:
        put(("training", "epochs"), "num_train_epochs", _float(view["num_train_epochs"]))
    _optimizer(view, put, used, draft, source, tool)
    if is_set(view.get("fsdp")):
        put(("distributed", "strategy"), "fsdp", "fsdp")
    if kind in ("sft", "dpo"):
        _trl(view, put, kind, lambda loc, value, why: draft.put(loc, value, source, why))
    return used


_ZERO = {1: "zero1", 2: "zero2", 3: "zero3"}


def deepspeed(value: Any, config: Path, source: str, draft: Draft) -> None:
    """``deepspeed``: a DeepSpeed JSON (a path, or the mapping inline) whose
    ``zero_optimization.stage`` is the strategy; unreadable, the stage is a FILL."""
    if not is_set(value):
        return
    ds: Any = value
    if isinstance(value, str):
        found = find(config, value)
        ds = read_mapping(found, "DeepSpeed config") if found is not None else None
    zero = ds.get("zero_optimization") if isinstance(ds, dict) else None
    stage = zero.get("stage") if isinstance(zero, dict) else None
    if isinstance(value, str) and stage in _ZERO:
        draft.put(
            ("distributed", "strategy"),
            _ZERO[stage],
            source,
            f"deepspeed: {value}: zero_optimization.stage",
        )
    elif stage in _ZERO:
        draft.put(
            ("distributed", "strategy"), _ZERO[stage], source, "deepspeed.zero_optimization.stage"
        )
    else:
        draft.fill(
            ("distributed", "strategy"),
            f"zero1 | zero2 | zero3: the ZeRO stage "
            f"of the DeepSpeed config {value!r} (not found here, or no stage in it)",
        )


def _float(value: Any) -> Any:
    """A number as a float (PyYAML reads ``2e-5``, with no dot, as a string, which
    the tools' argument parsers turn into a number); anything else as it is, for
    the schema check to refuse."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return float(value) if _number(value) else value


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _precision(view: dict[str, Any], put: Any, used: set[str]) -> None:
    for key, precision in (("bf16", "bf16"), ("fp16", "fp16"), ("tf32", "tf32")):
        if view.get(key) is True:
            put(("training", "precision"), key, precision)
            return
    if view.get("bf16") is False and view.get("fp16") is False:
        put(("training", "precision"), "bf16", "fp32")
        used.add("fp16")


def _optimizer(
    view: dict[str, Any], put: Any, used: set[str], draft: Draft, source: str, tool: str
) -> None:
    opt = ("training", "optimizer")
    if is_set(view.get("optim")):
        put((*opt, "name"), "optim")
    elif "optim" not in view:
        draft.fill((*opt, "name"), OPTIM_FILL.format(tool=tool))
    if view.get("learning_rate") is not None:
        put((*opt, "lr"), "learning_rate", _float(view["learning_rate"]))
    if view.get("weight_decay") is not None:
        put((*opt, "weight_decay"), "weight_decay", _float(view["weight_decay"]))
    if is_set(view.get("lr_scheduler_type")):
        put((*opt, "schedule"), "lr_scheduler_type", str(view["lr_scheduler_type"]))
    _warmup(view, put, used, draft, source)
    name = str(view.get("optim") or "")
    if "adam" in name and all(_number(view.get(k)) for k in ("adam_beta1", "adam_beta2")):
        put((*opt, "betas"), "adam_beta1", [float(view["adam_beta1"]), float(view["adam_beta2"])])
        used.add("adam_beta2")
    if "adam" in name and _number(view.get("adam_epsilon")):
        put((*opt, "eps"), "adam_epsilon", float(view["adam_epsilon"]))


def _warmup(view: dict[str, Any], put: Any, used: set[str], draft: Draft, source: str) -> None:
    """Warm-up as steps; a share of the run (transformers 5's float warmup_steps, or
    warmup_ratio) is steps only once the step count is known: a FILL."""
    warmup: Any = view.get("warmup_steps")
    ratio: Any = view.get("warmup_ratio")
    share: float | None = None
    if isinstance(warmup, float) and 0 < warmup < 1:
        share = warmup
    elif _number(ratio) and ratio > 0 and not (_integer(warmup) and warmup > 0):
        share = float(ratio)
    if share is not None:
        used.update(k for k in ("warmup_steps", "warmup_ratio") if k in view)
        draft.fill(
            ("training", "optimizer", "warmup_steps"),
            f"warm-up steps: {source} warms up over {share:g} of the run's optimizer steps "
            "(warmup_ratio); write that share of the step count",
        )
        return
    used.add("warmup_ratio")
    if isinstance(warmup, float) and warmup.is_integer():
        put(("training", "optimizer", "warmup_steps"), "warmup_steps", int(warmup))
    elif warmup is not None:  # steps; anything else is refused by the schema check, named
        put(("training", "optimizer", "warmup_steps"), "warmup_steps")


def _trl(cfg: dict[str, Any], put: Any, kind: str, derive: Any) -> None:
    for key in ("max_length", "max_seq_length"):
        if isinstance(cfg.get(key), int) and cfg[key] > 0:
            put(("training", "seq_len"), key)
    objective = ("training", "objective")
    what = "DPOConfig" if kind == "dpo" else "SFTConfig"
    derive((*objective, "kind"), kind, f"its keys are {what}'s")
    if kind == "sft":
        if isinstance(cfg.get("packing"), bool):
            put(("training", "packing", "enabled"), "packing")
        if cfg.get("completion_only_loss") is True or cfg.get("assistant_only_loss") is True:
            key = "assistant_only_loss"
            if cfg.get("completion_only_loss") is True:
                key = "completion_only_loss"
            put(("training", "loss_on"), key, "completion")
        derive(
            ("training", "loss_normalization"),
            "per-token",
            "SFTTrainer: the loss is averaged over the loss-carrying tokens of a step",
        )
        return
    if isinstance(cfg.get("beta"), (int, float)):
        put((*objective, "beta"), "beta", float(cfg["beta"]))
    if is_set(cfg.get("loss_type")):
        put((*objective, "loss_type"), "loss_type")
    if isinstance(cfg.get("label_smoothing"), (int, float)) and cfg["label_smoothing"]:
        put((*objective, "params", "label_smoothing"), "label_smoothing")
    derive(
        ("training", "loss_normalization"),
        "per-sequence",
        "DPOTrainer: the loss is averaged over preference pairs",
    )
