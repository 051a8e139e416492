"""Source: an axolotl config (YAML).

Layer: authoring (reads the config and looks up the files it names).  Keys as
axolotl's config reference documents them (docs/config-reference: model,
datasets, LoRA, training hyperparameters, RL); paths in it are taken relative
to the config's folder, then to the current one, as ``axolotl train CONFIG``
run from either would find them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.authoring import model_source
from ftmanifest.authoring.draft import Draft, is_set

MAPPED = frozenset(
    """
base_model revision_of_model datasets test_datasets val_set_size adapter lora_r lora_alpha
lora_dropout lora_target_modules lora_target_linear lora_modules_to_save lora_fan_in_fan_out
peft_use_rslora peft_use_dora peft_layer_replication sequence_len micro_batch_size
gradient_accumulation_steps num_epochs max_steps learning_rate optimizer lr_scheduler warmup_steps
weight_decay adam_beta1 adam_beta2 adam_epsilon max_grad_norm seed bf16 fp16 tf32
gradient_checkpointing sample_packing train_on_inputs output_dir fsdp fsdp_config deepspeed rl
rl_beta dpo_beta flash_attention sdp_attention
""".split()
)
# Documented keys that change what is trained but have no manifest field.
EFFECTIVE = frozenset(
    """
base_model_config tokenizer_config model_type tokenizer_type trust_remote_code tokenizer_use_fast
tokenizer_legacy resize_token_embeddings_to_32x shrink_embeddings random_init_weights
overrides_of_model_config overrides_of_model_kwargs bnb_config_kwargs gptq load_in_8bit
load_in_4bit bfloat16 float16 lora_model_dir peft_layers_to_transform loraplus_lr_ratio
loraplus_lr_embedding peft relora_steps relora_warmup_steps relora_anneal_steps
relora_prune_ratio relora_cpu_offload chat_template chat_template_jinja default_system_message
pad_to_sequence_len eval_sample_packing sample_packing_eff_est total_num_tokens
sample_packing_group_size sample_packing_bin_size pretraining_sample_concatenation
batch_flattening warmup_ratio lr_quadratic_warmup lr_scheduler_kwargs cosine_min_lr_ratio
cosine_constant_lr_ratio lr_div_factor optim_args optim_target_modules adam_beta3 adam_epsilon2
neftune_noise_alpha xformers_attention flash_attn_cross_entropy flash_attn_rms_norm
flash_attn_fuse_qkv flash_attn_fuse_mlp s2_attention special_tokens tokens
added_tokens_overrides sequence_parallel_degree heads_k_stride ring_attn_func
pretraining_dataset group_by_length dataset_exact_deduplication shuffle_merged_datasets
unfrozen_parameters lora_mlp_kernel lora_qkv_kernel lora_o_kernel plugins image_size
image_resize_algorithm ddp_bucket_cap_mb ddp_broadcast_buffers embeddings_skip_upcast
""".split()
)
# Documented keys about logging, saving, evaluating, hardware and bookkeeping.
BOOKKEEPING = frozenset(
    """
base_model_ignore_patterns is_falcon_derived_model is_llama_derived_model
is_qwen_derived_model is_mistral_derived_model gpu_memory_limit lora_on_cpu
dataset_prepared_path push_dataset_to_hub dataset_processes dataset_keep_in_memory hub_model_id
hub_strategy hf_use_auth_token dataset_shard_num dataset_shard_idx device_map max_memory
wandb_mode wandb_project wandb_entity wandb_watch wandb_name wandb_run_id wandb_log_model
mlflow_tracking_uri mlflow_experiment_name mlflow_run_name hf_mlflow_log_artifacts
use_comet comet_api_key comet_workspace comet_project_name comet_experiment_key comet_mode
comet_online comet_experiment_config use_tensorboard torch_compile torch_compile_backend
torch_compile_mode eval_batch_size logging_steps eval_steps evals_per_epoch eval_strategy
save_strategy save_steps saves_per_epoch save_total_limit save_only_model
include_tokens_per_second auto_find_batch_size eval_table_size eval_max_new_tokens
do_causal_lm_eval eval_causal_lm_metrics profiler_steps loss_watchdog_threshold
loss_watchdog_patience save_safetensors early_stopping_patience flash_optimum
low_cpu_mem_usage resume_from_checkpoint auto_resume_from_checkpoints local_rank ddp_timeout
torchdistx_path debug strict dataloader_num_workers dataloader_pin_memory
dataloader_prefetch_factor dataloader_drop_last
""".split()
)
KNOWN = MAPPED | EFFECTIVE | BOOKKEEPING
DATASET_KEYS = frozenset(
    """
path type ds_type data_files shards shards_idx preprocess_shards name train_on_split split
revision trust_remote_code system_prompt system_format field_system field_instruction
field_input field_output format no_input_format field chat_template chat_template_jinja
field_messages message_property_mappings message_field_role message_field_content roles
roles_to_train train_on_eos train_on_eot field_tools drop_system_message field_thinking
""".split()
)


def looks_like(cfg: dict[str, Any]) -> bool:
    return "base_model" in cfg


def read(path: Path, base: Path, draft: Draft) -> None:
    from ftmanifest.authoring.formats import read_mapping

    cfg = read_mapping(path, "axolotl config")
    source = path.name
    put = _putter(cfg, source, draft)
    _model(cfg, path, base, source, draft)
    _datasets(cfg, path, source, draft)
    _method(cfg, put, source, draft)
    _training(cfg, put, source, draft)
    draft.unknown_keys(source, "axolotl", sorted(k for k in cfg if k not in KNOWN))
    draft.not_carried(source, sorted(k for k in cfg if k in EFFECTIVE and is_set(cfg[k])))


def _putter(cfg: dict[str, Any], source: str, draft: Draft) -> Any:
    def put(loc: tuple[str, ...], key: str, value: Any = None) -> None:
        if is_set(cfg.get(key)) or (key in cfg and cfg[key] in (0, False)):
            draft.put(loc, cfg[key] if value is None else value, source, key)

    return put


def find(path: Path, name: str) -> Path | None:
    """``name`` as axolotl run beside the config, or from here, would open it."""
    for folder in (path.parent, Path.cwd()):
        candidate = folder / name
        if candidate.exists():
            return candidate
    return None


def _model(cfg: dict[str, Any], path: Path, base: Path, source: str, draft: Draft) -> None:
    if cfg.get("flash_attention") is True:
        draft.put(("model", "attn_implementation"), "flash_attention_2", source, "flash_attention")
    elif cfg.get("sdp_attention") is True:
        draft.put(("model", "attn_implementation"), "sdpa", source, "sdp_attention")
    name = cfg.get("base_model")
    if not isinstance(name, str) or not name:
        return
    local = find(path, name) if (name.startswith((".", "/")) or "/" not in name) else None
    if local is not None and local.is_dir():
        model_source.read_folder(local, base, draft)
        return
    revision = cfg.get("revision_of_model")
    ref = f"{name}@{revision}" if is_set(revision) else name
    model_source.read_ref(ref, draft, source=source, key="base_model")


def _datasets(cfg: dict[str, Any], path: Path, source: str, draft: Draft) -> None:
    for key, role in (("datasets", "train"), ("test_datasets", "eval")):
        for i, ds in enumerate(cfg.get(key) or []):
            where = f"{key}[{i}]"
            if isinstance(ds, str):
                ds = {"path": ds}
            if not isinstance(ds, dict):
                draft.notes.append(f"{source}: {where} is not a mapping: not read")
                continue
            draft.unknown_keys(
                source, f"axolotl {key}[]", sorted(str(k) for k in ds if k not in DATASET_KEYS)
            )
            files = ds.get("data_files") or ds.get("path")
            for j, name in enumerate([files] if isinstance(files, str) else files or []):
                field = "data_files" if ds.get("data_files") else "path"
                at = f"{where}.{field}" + (f"[{j}]" if not isinstance(files, str) else "")
                found = find(path, str(name))
                if found is None:
                    draft.notes.append(
                        f"{source}: {at} {name!r} is not a local file (a hub dataset, or "
                        "missing): ftmanifest pins local files; download it and pass its files "
                        "with --from"
                    )
                    continue
                draft.add_data(found, role, f"{source}: {key}", source, at)
    size = cfg.get("val_set_size")
    if isinstance(size, (int, float)) and size > 0:
        draft.notes.append(
            f"{source}: val_set_size {size}: axolotl splits the evaluation set out of the "
            "training data as it loads it; to pin and check that split apart from training, "
            "write it to its own file (test_datasets) and pass it with --from"
        )


def _method(cfg: dict[str, Any], put: Any, source: str, draft: Draft) -> None:
    adapter = cfg.get("adapter")
    if not is_set(adapter):
        draft.put(("method", "kind"), "full", source, "adapter (unset: every parameter trains)")
        return
    if adapter not in ("lora", "qlora"):
        draft.notes.append(f"{source}: adapter {adapter!r} is not lora/qlora: method not derived")
        return
    if adapter == "qlora":
        draft.notes.append(
            f"{source}: adapter qlora trains LoRA on a 4-bit base (load_in_4bit): the "
            "quantisation has no manifest field; name it in the hypothesis"
        )
    m = ("method",)
    draft.put((*m, "kind"), "lora", source, "adapter")
    put((*m, "r"), "lora_r")
    if isinstance(cfg.get("lora_alpha"), (int, float)):
        put((*m, "alpha"), "lora_alpha", float(cfg["lora_alpha"]))
    if isinstance(cfg.get("lora_dropout"), (int, float)):
        put((*m, "dropout"), "lora_dropout", float(cfg["lora_dropout"]))
    if cfg.get("lora_target_linear") is True:
        put((*m, "target_modules"), "lora_target_linear", "all-linear")
    targets = cfg.get("lora_target_modules")
    if isinstance(targets, list) and targets:
        put((*m, "target_modules"), "lora_target_modules", sorted({str(t) for t in targets}))
    elif isinstance(targets, str) and targets:
        put((*m, "target_modules"), "lora_target_modules")
    saved = cfg.get("lora_modules_to_save")
    if isinstance(saved, list) and saved:
        put((*m, "modules_to_save"), "lora_modules_to_save", sorted({str(t) for t in saved}))
    for key, name in (
        ("lora_fan_in_fan_out", "fan_in_fan_out"),
        ("peft_use_rslora", "use_rslora"),
        ("peft_use_dora", "use_dora"),
        ("peft_layer_replication", "layer_replication"),
    ):
        put((*m, name), key)


def _number(value: Any) -> float | None:
    """A YAML number; PyYAML reads ``2e-5`` (no dot) as a string."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _training(cfg: dict[str, Any], put: Any, source: str, draft: Draft) -> None:
    t, opt = ("training",), ("training", "optimizer")
    put((*t, "seq_len"), "sequence_len")
    put((*t, "micro_batch"), "micro_batch_size")
    put((*t, "grad_accum"), "gradient_accumulation_steps")
    if _number(cfg.get("num_epochs")):
        put((*t, "epochs"), "num_epochs", _number(cfg["num_epochs"]))
    put((*t, "max_steps"), "max_steps")
    put((*opt, "name"), "optimizer")
    if _number(cfg.get("learning_rate")):
        put((*opt, "lr"), "learning_rate", _number(cfg["learning_rate"]))
    if _number(cfg.get("weight_decay")) is not None:
        put((*opt, "weight_decay"), "weight_decay", _number(cfg["weight_decay"]))
    put((*opt, "schedule"), "lr_scheduler")
    put((*opt, "warmup_steps"), "warmup_steps")
    b1, b2 = _number(cfg.get("adam_beta1")), _number(cfg.get("adam_beta2"))
    if b1 is not None and b2 is not None:
        put((*opt, "betas"), "adam_beta1", [b1, b2])
    if _number(cfg.get("adam_epsilon")):
        put((*opt, "eps"), "adam_epsilon", _number(cfg["adam_epsilon"]))
    if _number(cfg.get("max_grad_norm")) is not None:
        put((*t, "max_grad_norm"), "max_grad_norm", _number(cfg["max_grad_norm"]))
    if isinstance(cfg.get("seed"), int):
        for name in ("python", "numpy", "torch", "data_order"):
            put(("seeds", name), "seed")
    for key in ("bf16", "fp16", "tf32"):
        if cfg.get(key) in (True, "auto", "full"):
            put((*t, "precision"), key, key)
            if cfg[key] == "auto":
                draft.notes.append(
                    f"{source}: {key}: auto uses {key} only where the device supports it: "
                    f"training.precision says {key}; check it on the machine that trains"
                )
            break
    if is_set(cfg.get("gradient_checkpointing")):
        put((*t, "activation_checkpointing"), "gradient_checkpointing", True)
    if isinstance(cfg.get("sample_packing"), bool):
        put((*t, "packing", "enabled"), "sample_packing")
        if cfg["sample_packing"]:
            put((*t, "packing", "mask_policy"), "sample_packing", "block-diagonal")
    if isinstance(cfg.get("train_on_inputs"), bool):
        put((*t, "loss_on"), "train_on_inputs", "all" if cfg["train_on_inputs"] else "completion")
    _objective(cfg, put, source, draft)
    if is_set(cfg.get("output_dir")):
        put(("export", "path"), "output_dir", str(cfg["output_dir"]))
        kind = "adapter" if cfg.get("adapter") in ("lora", "qlora") else "model"
        draft.put(("export", "kind"), kind, source, "adapter")
    if is_set(cfg.get("fsdp")) or is_set(cfg.get("fsdp_config")):
        put(("distributed", "strategy"), "fsdp" if is_set(cfg.get("fsdp")) else "fsdp_config",
            "fsdp")  # fmt: skip
    if is_set(cfg.get("deepspeed")):
        draft.notes.append(
            f"{source}: deepspeed {cfg['deepspeed']!r}: set distributed.strategy to the ZeRO "
            "stage that file configures (zero1, zero2, zero3)"
        )


_RL = {"dpo": ("dpo", None), "ipo": ("dpo", "ipo"), "kto": ("kto", None),
       "orpo": ("orpo", None), "simpo": ("cpo", "simpo"), "grpo": ("grpo", None)}  # fmt: skip


def _objective(cfg: dict[str, Any], put: Any, source: str, draft: Draft) -> None:
    rl = cfg.get("rl")
    if not is_set(rl):
        draft.put(
            ("training", "loss_normalization"),
            "per-token",
            source,
            "no rl: axolotl's causal-LM loss is the mean over the tokens that carry loss",
        )
        return
    kind, loss_type = _RL.get(str(rl).lower(), (None, None))
    if kind is None:
        draft.notes.append(f"{source}: rl {rl!r} is not one ftmanifest knows: objective not set")
        return
    o = ("training", "objective")
    put((*o, "kind"), "rl", kind)
    if loss_type:
        put((*o, "loss_type"), "rl", loss_type)
    for key in ("rl_beta", "dpo_beta"):
        if _number(cfg.get(key)) is not None:
            put((*o, "beta"), key, _number(cfg[key]))
    if kind in ("dpo", "cpo", "orpo", "kto"):
        draft.put(("training", "loss_normalization"), "per-sequence", source,
                  f"rl: {rl}: the loss is averaged over preference pairs")  # fmt: skip
