"""Source: a TrainingArguments / SFTConfig / DPOConfig JSON (``args.to_json_string()``).

Layer: authoring (reads one JSON file).  The keys are the dataclass fields of
transformers' ``TrainingArguments`` (5.x, with the 4.x names it dropped),
TRL's ``SFTConfig`` and ``DPOConfig`` (1.x, with older names such as
``max_seq_length``), read from the installed sources; a test checks the lists
still hold every field of what is installed.  ``training_args.bin`` is a
pickle (``torch.save(args)``): it is refused, never unpickled.  LLaMA-Factory
takes the same keys, so ``apply`` is shared with its reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.authoring.draft import Draft, is_set

TRAINING_ARGUMENTS = frozenset(
    """
output_dir per_device_train_batch_size num_train_epochs max_steps learning_rate lr_scheduler_type
lr_scheduler_kwargs warmup_steps optim optim_args weight_decay adam_beta1 adam_beta2 adam_epsilon
optim_target_modules gradient_accumulation_steps average_tokens_across_devices max_grad_norm
label_smoothing_factor bf16 fp16 bf16_full_eval fp16_full_eval tf32 activation_checkpointing
activation_checkpointing_kwargs gradient_checkpointing gradient_checkpointing_kwargs torch_compile
torch_compile_backend torch_compile_mode use_liger_kernel liger_kernel_config use_cache
neftune_noise_alpha torch_empty_cache_steps auto_find_batch_size logging_strategy logging_steps
logging_first_step log_on_each_node logging_nan_inf_filter include_num_input_tokens_seen log_level
log_level_replica disable_tqdm report_to run_name project trackio_space_id trackio_bucket_id
trackio_static_space_id eval_strategy eval_steps eval_delay per_device_eval_batch_size
prediction_loss_only eval_on_start eval_do_concat_batches eval_use_gather_object
eval_accumulation_steps include_for_metrics batch_eval_metrics save_only_model save_strategy
save_steps save_on_each_node save_total_limit enable_jit_checkpoint push_to_hub hub_token
hub_private_repo hub_model_id hub_strategy hub_always_push hub_revision load_best_model_at_end
metric_for_best_model greater_is_better ignore_data_skip restore_callback_states_from_checkpoint
full_determinism seed data_seed use_cpu accelerator_config parallelism_config dataloader_drop_last
dataloader_num_workers dataloader_pin_memory dataloader_persistent_workers
dataloader_prefetch_factor dataloader_multiprocessing_context dataloader_in_order
remove_unused_columns label_names train_sampling_strategy length_column_name
ddp_find_unused_parameters ddp_bucket_cap_mb ddp_broadcast_buffers ddp_static_graph ddp_backend
ddp_timeout fsdp fsdp_config deepspeed debug skip_memory_metrics do_train do_eval do_predict
resume_from_checkpoint local_rank
""".split()
)
# TrainingArguments fields of transformers 4.4x that 5.x dropped or renamed
TRAINING_ARGUMENTS_4 = frozenset(
    """
overwrite_output_dir per_gpu_train_batch_size per_gpu_eval_batch_size warmup_ratio logging_dir
save_safetensors no_cuda use_mps_device jit_mode_eval use_ipex fp16_opt_level
half_precision_backend tpu_num_cores tpu_metrics_debug past_index fsdp_min_num_params
fsdp_transformer_layer_cls_to_wrap adafactor group_by_length use_legacy_prediction_loop
include_inputs_for_metrics fp16_backend evaluation_strategy push_to_hub_model_id
push_to_hub_organization push_to_hub_token mp_parameters torchdynamo ray_scope dispatch_batches
split_batches include_tokens_per_second _n_gpu
""".split()
)
SFT_CONFIG = frozenset(
    """
model_init_kwargs trust_remote_code router_aux_loss_coef chat_template_path dataset_text_field
dataset_kwargs dataset_num_proc eos_token max_length truncation_mode shuffle_dataset packing
packing_strategy padding_free pad_to_multiple_of eval_packing completion_only_loss
assistant_only_loss loss_type activation_offloading pad_token
max_seq_length dataset_batch_size num_of_sequences chars_per_token use_liger
""".split()
)
DPO_CONFIG = frozenset(
    """
model_init_kwargs trust_remote_code router_aux_loss_coef disable_dropout dataset_num_proc max_length
truncation_mode padding_free pad_to_multiple_of precompute_ref_log_probs precompute_ref_batch_size
loss_type loss_weights ld_alpha f_divergence_type f_alpha_divergence_coef label_smoothing beta
use_weighting discopop_tau activation_offloading sync_ref_model ref_model_mixup_alpha
ref_model_sync_steps pad_token
max_prompt_length max_completion_length generate_during_eval reference_free rpo_alpha
use_logits_to_keep padding_value label_pad_token_id tools
""".split()
)
KNOWN = TRAINING_ARGUMENTS | TRAINING_ARGUMENTS_4 | SFT_CONFIG | DPO_CONFIG

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
    from ftmanifest.authoring.formats import read_mapping

    cfg = read_mapping(path, "TrainingArguments JSON")
    source = path.name
    kind = objective_of(cfg)
    what = {"dpo": "DPOConfig", "sft": "SFTConfig"}.get(kind, "TrainingArguments")
    mapped = apply(cfg, source, draft, kind=kind)
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


def apply(cfg: dict[str, Any], source: str, draft: Draft, *, kind: str = "trainer") -> set[str]:
    """Put what TrainingArguments-style keys say; the keys it used."""
    used: set[str] = set()

    def put(loc: tuple[str, ...], key: str, value: Any = None) -> None:
        if key in cfg:
            used.add(key)
            draft.put(loc, cfg[key] if value is None else value, source, key)

    seed = cfg.get("seed")
    if isinstance(seed, int):
        for name in ("python", "numpy", "torch"):
            put(("seeds", name), "seed")
        data_seed = cfg.get("data_seed")
        if isinstance(data_seed, int):
            put(("seeds", "data_order"), "data_seed")
        else:
            put(("seeds", "data_order"), "seed")  # the Trainer's sampler uses seed then
    if cfg.get("full_determinism") is not None:
        put(("seeds", "deterministic"), "full_determinism", bool(cfg["full_determinism"]))
    for key in ("per_device_train_batch_size", "per_gpu_train_batch_size"):
        if isinstance(cfg.get(key), int) and cfg[key] > 0:
            put(("training", "micro_batch"), key)
    if isinstance(cfg.get("gradient_accumulation_steps"), int):
        put(("training", "grad_accum"), "gradient_accumulation_steps")
    if isinstance(cfg.get("max_grad_norm"), (int, float)) and not isinstance(
        cfg["max_grad_norm"], bool
    ):
        put(("training", "max_grad_norm"), "max_grad_norm")
    for key, precision in (("bf16", "bf16"), ("fp16", "fp16"), ("tf32", "tf32")):
        if cfg.get(key) is True:
            put(("training", "precision"), key, precision)
            break
    else:
        if cfg.get("bf16") is False and cfg.get("fp16") is False:
            put(("training", "precision"), "bf16", "fp32")
            used.add("fp16")
    for key in ("gradient_checkpointing", "activation_checkpointing"):
        if isinstance(cfg.get(key), bool):
            put(("training", "activation_checkpointing"), key)
    if isinstance(cfg.get("max_steps"), int) and cfg["max_steps"] > 0:
        put(("training", "max_steps"), "max_steps")
    elif isinstance(cfg.get("num_train_epochs"), (int, float)) and cfg["num_train_epochs"] > 0:
        put(("training", "epochs"), "num_train_epochs", float(cfg["num_train_epochs"]))
    _optimizer(cfg, put, used, draft, source)
    if is_set(cfg.get("fsdp")):
        put(("distributed", "strategy"), "fsdp", "fsdp")
    if is_set(cfg.get("deepspeed")):
        draft.notes.append(
            f"{source}: deepspeed {cfg['deepspeed']!r}: set distributed.strategy to the ZeRO "
            "stage it configures (zero1, zero2, zero3)"
        )
    if kind in ("sft", "dpo"):
        _trl(cfg, put, kind, lambda loc, value, why: draft.put(loc, value, source, why))
    return used


def _optimizer(cfg: dict[str, Any], put: Any, used: set[str], draft: Draft, source: str) -> None:
    opt = ("training", "optimizer")
    if is_set(cfg.get("optim")):
        put((*opt, "name"), "optim")
    if isinstance(cfg.get("learning_rate"), (int, float)):
        put((*opt, "lr"), "learning_rate", float(cfg["learning_rate"]))
    if isinstance(cfg.get("weight_decay"), (int, float)):
        put((*opt, "weight_decay"), "weight_decay", float(cfg["weight_decay"]))
    if is_set(cfg.get("lr_scheduler_type")):
        put((*opt, "schedule"), "lr_scheduler_type", str(cfg["lr_scheduler_type"]))
    warmup = cfg.get("warmup_steps")
    if isinstance(warmup, int) and not isinstance(warmup, bool):
        put((*opt, "warmup_steps"), "warmup_steps")
    elif isinstance(warmup, float):  # transformers 5: a float below 1 is a ratio
        used.add("warmup_steps")
        draft.notes.append(
            f"{source}: warmup_steps {warmup} is a share of the run: write "
            "training.optimizer.warmup_steps as steps once the step count is known"
        )
    name = str(cfg.get("optim") or "")
    if "adam" in name and all(
        isinstance(cfg.get(k), (int, float)) for k in ("adam_beta1", "adam_beta2")
    ):
        put((*opt, "betas"), "adam_beta1", [float(cfg["adam_beta1"]), float(cfg["adam_beta2"])])
        used.add("adam_beta2")
    if "adam" in name and isinstance(cfg.get("adam_epsilon"), (int, float)):
        put((*opt, "eps"), "adam_epsilon", float(cfg["adam_epsilon"]))


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
