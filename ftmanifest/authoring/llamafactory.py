"""Source: a LLaMA-Factory training config (YAML, ``llamafactory-cli train CONFIG``).

Layer: authoring (reads the config and its ``dataset_info.json``).  Keys: the
fields of LLaMA-Factory's ``ModelArguments``, ``DataArguments``,
``FinetuningArguments`` and ``GeneratingArguments`` (src/llamafactory/hparams),
plus every ``Seq2SeqTrainingArguments`` field, which ``trainer_args.apply``
reads.  Datasets are names in ``dataset_dir/dataset_info.json``; each one's
``file_name`` is the file pinned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.authoring import model_source, trainer_args
from ftmanifest.authoring.axolotl import find
from ftmanifest.authoring.draft import Draft, is_set

MAPPED = frozenset(
    """
model_name_or_path model_revision stage finetuning_type lora_rank lora_alpha lora_dropout
lora_target additional_target use_rslora use_dora dataset eval_dataset dataset_dir cutoff_len
train_on_prompt packing neat_packing val_size flash_attn pref_beta pref_loss
""".split()
)
EFFECTIVE = frozenset(
    """
adapter_name_or_path resize_vocab split_special_tokens add_tokens add_special_tokens rope_scaling
shift_attn mixture_of_depths use_unsloth use_unsloth_gc enable_liger_kernel moe_aux_loss_coef
disable_gradient_checkpointing use_reentrant_gc upcast_layernorm upcast_lmhead_output
train_from_scratch quantization_method quantization_bit quantization_type double_quantization
template mask_history mix_strategy interleave_probs max_samples default_system enable_thinking
tool_format use_llama_pro use_adam_mini use_muon freeze_vision_tower
freeze_multi_modal_projector freeze_language_model freeze_trainable_layers
freeze_trainable_modules freeze_extra_modules loraplus_lr_ratio loraplus_lr_embedding pissa_init
pissa_iter pissa_convert create_new_adapter pref_ftx dpo_label_smoothing kto_chosen_weight
kto_rejected_weight simpo_gamma ppo_buffer_size ppo_epochs ppo_score_norm ppo_target
ppo_whiten_rewards ref_model ref_model_adapters ref_model_quantization_bit reward_model
reward_model_adapters reward_model_quantization_bit reward_model_type use_galore galore_target
galore_rank galore_update_interval galore_scale galore_proj_type galore_layerwise use_apollo
apollo_target apollo_rank apollo_update_interval apollo_scale apollo_proj apollo_proj_type
apollo_scale_type apollo_layerwise apollo_scale_front use_badam badam_mode badam_start_block
badam_switch_mode badam_switch_interval badam_update_ratio badam_mask_mode badam_verbose
image_max_pixels image_min_pixels video_max_pixels video_min_pixels video_fps video_maxlen
ignore_pad_token_for_loss disable_shuffling train_sampling_strategy
""".split()
)
BOOKKEEPING = frozenset(
    """
adapter_folder cache_dir use_fast_tokenizer low_cpu_mem_usage infer_backend offload_folder
use_cache infer_dtype hf_hub_token ms_hub_token om_hub_token print_param_status trust_remote_code
quantization_device_map export_dir export_size export_device export_quantization_bit
export_quantization_dataset export_quantization_nsamples export_quantization_maxlen
export_legacy_format export_hub_model_id vllm_maxlen vllm_gpu_util vllm_enforce_eager
vllm_max_lora_rank vllm_config media_dir streaming buffer_size overwrite_cache
preprocessing_batch_size preprocessing_num_workers eval_num_beams eval_on_each_dataset
tokenized_path data_shared_file_system compute_accuracy early_stopping_steps plot_loss
include_effective_tokens_per_second use_swanlab swanlab_project swanlab_workspace
swanlab_run_name swanlab_mode swanlab_api_key swanlab_logdir swanlab_lark_webhook_url
swanlab_lark_secret do_sample temperature top_p top_k num_beams max_length max_new_tokens
repetition_penalty length_penalty skip_special_tokens sortish_sampler predict_with_generate
generation_max_length generation_num_beams generation_config
""".split()
)
KNOWN = MAPPED | EFFECTIVE | BOOKKEEPING | trainer_args.KNOWN
_STAGES = {"dpo": "dpo", "kto": "kto", "rm": "reward"}
_PREF_LOSS = {"orpo": "orpo", "simpo": "cpo"}
_ATTN = {"fa2": "flash_attention_2", "sdpa": "sdpa", "disabled": "eager", "eager": "eager"}


def looks_like(cfg: dict[str, Any]) -> bool:
    return "model_name_or_path" in cfg and bool({"stage", "finetuning_type"} & cfg.keys())


def _names(value: Any) -> list[str]:
    """LLaMA-Factory's comma-separated lists (``lora_target: q_proj,v_proj``)."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value] if isinstance(value, list) else []


def read(path: Path, base: Path, draft: Draft) -> None:
    from ftmanifest.authoring.formats import read_mapping

    cfg = read_mapping(path, "LLaMA-Factory config")
    source = path.name
    _model(cfg, path, base, source, draft)
    _method(cfg, source, draft)
    _datasets(cfg, path, source, draft)
    stage = str(cfg.get("stage") or "sft")
    used = trainer_args.apply(cfg, source, draft)
    _data_side(cfg, stage, source, draft)
    if is_set(cfg.get("output_dir")):
        draft.put(("export", "path"), str(cfg["output_dir"]), source, "output_dir")
        lora = cfg.get("finetuning_type") == "lora"
        draft.put(("export", "kind"), "adapter" if lora else "model", source, "finetuning_type")
    draft.unknown_keys(source, "LLaMA-Factory", sorted(k for k in cfg if k not in KNOWN))
    effective = EFFECTIVE | (trainer_args.KNOWN - trainer_args.BOOKKEEPING - used)
    draft.not_carried(source, sorted(k for k in cfg if k in effective - MAPPED and is_set(cfg[k])))


def _model(cfg: dict[str, Any], path: Path, base: Path, source: str, draft: Draft) -> None:
    if cfg.get("flash_attn") in _ATTN:
        draft.put(("model", "attn_implementation"), _ATTN[cfg["flash_attn"]], source, "flash_attn")
    name = cfg.get("model_name_or_path")
    if not isinstance(name, str) or not name:
        return
    local = find(path, name)
    if local is not None and local.is_dir():
        model_source.read_folder(local, base, draft)
        return
    revision = cfg.get("model_revision")
    ref = f"{name}@{revision}" if is_set(revision) else name
    model_source.read_ref(ref, draft, source=source, key="model_name_or_path")


def _method(cfg: dict[str, Any], source: str, draft: Draft) -> None:
    kind = cfg.get("finetuning_type", "lora")  # LLaMA-Factory's default
    m = ("method",)
    if kind in ("full", "freeze"):
        draft.put((*m, "kind"), "full", source, "finetuning_type")
        if kind == "freeze":
            draft.notes.append(
                f"{source}: finetuning_type freeze trains only some layers: list the frozen "
                "ones in method.frozen_modules"
            )
        return
    draft.put((*m, "kind"), "lora", source, "finetuning_type")
    for key, name in (("lora_rank", "r"), ("lora_alpha", "alpha"), ("lora_dropout", "dropout")):
        value = cfg.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            draft.put((*m, name), float(value) if name != "r" else value, source, key)
    targets = _names(cfg.get("lora_target"))
    if targets == ["all"]:
        draft.put((*m, "target_modules"), "all-linear", source, "lora_target")
    elif targets:
        draft.put((*m, "target_modules"), sorted(set(targets)), source, "lora_target")
    extra = _names(cfg.get("additional_target"))
    if extra:
        draft.put((*m, "modules_to_save"), sorted(set(extra)), source, "additional_target")
    for key in ("use_rslora", "use_dora"):
        if isinstance(cfg.get(key), bool):
            draft.put((*m, key), cfg[key], source, key)


def _datasets(cfg: dict[str, Any], path: Path, source: str, draft: Draft) -> None:
    folder_name = str(cfg.get("dataset_dir") or "data")
    folder = find(path, folder_name)
    info: dict[str, Any] = {}
    if folder is not None and (folder / "dataset_info.json").is_file():
        from ftmanifest.authoring.formats import read_mapping

        info = read_mapping(folder / "dataset_info.json", "LLaMA-Factory dataset_info.json")
    for key, role in (("dataset", "train"), ("eval_dataset", "eval")):
        for name in _names(cfg.get(key)):
            entry = info.get(name)
            file_name = entry.get("file_name") if isinstance(entry, dict) else None
            if folder is None or not isinstance(file_name, str):
                draft.notes.append(
                    f"{source}: {key} {name!r} is not a local file in "
                    f"{folder_name}/dataset_info.json (a hub dataset, or no such entry): pass "
                    "its files with --from"
                )
                continue
            draft.add_data(folder / file_name, role, f"{source}: {key}", source, f"{key}: {name}")


def _data_side(cfg: dict[str, Any], stage: str, source: str, draft: Draft) -> None:
    t = ("training",)
    if isinstance(cfg.get("cutoff_len"), int):
        draft.put((*t, "seq_len"), cfg["cutoff_len"], source, "cutoff_len")
    if isinstance(cfg.get("train_on_prompt"), bool):
        loss_on = "all" if cfg["train_on_prompt"] else "completion"
        draft.put((*t, "loss_on"), loss_on, source, "train_on_prompt")
    for key, policy in (("neat_packing", "block-diagonal"), ("packing", "none")):
        if cfg.get(key) is True:
            draft.put((*t, "packing", "enabled"), True, source, key)
            draft.put((*t, "packing", "mask_policy"), policy, source, key)
            break
    size = cfg.get("val_size")
    if isinstance(size, (int, float)) and size > 0:
        draft.notes.append(
            f"{source}: val_size {size}: LLaMA-Factory splits the evaluation set out of the "
            "training data as it loads it; write it to its own file (eval_dataset) to pin it"
        )
    if stage in ("sft", "pt"):
        why = f"stage {stage}: the causal-LM loss is the mean over the tokens that carry loss"
        draft.put((*t, "loss_normalization"), "per-token", source, why)
        return
    kind = _STAGES.get(stage)
    if kind is None:
        draft.notes.append(f"{source}: stage {stage!r}: objective not derived")
        return
    pref = str(cfg.get("pref_loss") or "sigmoid")
    if kind == "dpo" and pref in _PREF_LOSS:
        kind = _PREF_LOSS[pref]
    o = (*t, "objective")
    draft.put((*o, "kind"), kind, source, "stage")
    if kind in ("dpo", "cpo") and is_set(cfg.get("pref_loss")):
        draft.put((*o, "loss_type"), pref, source, "pref_loss")
    if isinstance(cfg.get("pref_beta"), (int, float)):
        draft.put((*o, "beta"), float(cfg["pref_beta"]), source, "pref_beta")
    if kind != "reward":
        draft.put((*t, "loss_normalization"), "per-sequence", source,
                  f"stage {stage}: the loss is averaged over preference pairs")  # fmt: skip
