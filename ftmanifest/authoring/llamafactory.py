"""Source: a LLaMA-Factory training config (YAML, ``llamafactory-cli train CONFIG``).

Layer: edges - authoring (reads the config, its ``dataset_info.json`` and DeepSpeed
config).  Keys: the fields of LLaMA-Factory's hparams dataclasses
(``keys.LLAMAFACTORY``) plus every ``Seq2SeqTrainingArguments`` field, which
``trainer_args.apply`` reads.  A key the config leaves out is LLaMA-Factory's
default, or transformers' TrainingArguments' (``defaults``).  Datasets are
names in ``dataset_dir/dataset_info.json``; each one's ``file_name`` is the
file pinned.  Paths are taken relative to the config's folder, then to the
current one (LLaMA-Factory's examples run from the repository's root).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.authoring import keys, model_source, trainer_args
from ftmanifest.authoring.defaults import LLAMAFACTORY, LLAMAFACTORY_ALPHA, TRAINER, Default
from ftmanifest.authoring.draft import Draft, is_set
from ftmanifest.authoring.formats import expect, find, read_mapping

MAPPED = frozenset(
    """
model_name_or_path model_revision stage finetuning_type lora_rank lora_alpha lora_dropout
lora_target additional_target use_rslora use_dora dataset eval_dataset dataset_dir cutoff_len
train_on_prompt packing neat_packing val_size flash_attn pref_beta pref_loss deepspeed
disable_gradient_checkpointing
""".split()
)
BOOKKEEPING = frozenset(
    """
adapter_folder cache_dir use_fast_tokenizer low_cpu_mem_usage infer_backend offload_folder
use_cache infer_dtype hf_hub_token ms_hub_token om_hub_token print_param_status trust_remote_code
quantization_device_map export_dir export_size export_device export_quantization_bit
export_quantization_dataset export_quantization_nsamples export_quantization_maxlen
export_legacy_format export_hub_model_id export_hf_on_finish vllm_maxlen vllm_gpu_util
vllm_enforce_eager vllm_max_lora_rank vllm_config sglang_config sglang_lora_backend sglang_maxlen
sglang_mem_fraction sglang_tp_size media_dir streaming buffer_size overwrite_cache
preprocessing_batch_size preprocessing_num_workers eval_num_beams eval_on_each_dataset
tokenized_path data_shared_file_system compute_accuracy early_stopping_steps plot_loss
include_effective_tokens_per_second use_swanlab swanlab_project swanlab_workspace
swanlab_run_name swanlab_mode swanlab_api_key swanlab_logdir swanlab_lark_webhook_url
swanlab_lark_secret do_sample temperature top_p top_k num_beams max_length max_new_tokens
repetition_penalty length_penalty skip_special_tokens sortish_sampler predict_with_generate
generation_max_length generation_num_beams generation_config device_map download_mode
enable_torch_profiler profiler_output_dir profiler_wait_steps profiler_warmup_steps
profiler_active_steps profiler_repeat profiler_record_shapes profiler_profile_memory
profiler_with_stack profile_modules ray_num_workers ray_init_kwargs master_addr master_port task
task_dir save_dir lang n_shot batch_size
""".split()
)
KNOWN = keys.LLAMAFACTORY | MAPPED | BOOKKEEPING | trainer_args.KNOWN
_STAGES = {"dpo": "dpo", "kto": "kto", "rm": "reward"}
_PREF_LOSS = {"orpo": "orpo", "simpo": "cpo"}
_ATTN = {"fa2": "flash_attention_2", "sdpa": "sdpa", "disabled": "eager", "eager": "eager"}
# Keys only LLaMA-Factory's configs carry (TRL's CLI configs share model_name_or_path).
_OWN = frozenset(
    {
        "stage",
        "finetuning_type",
        "template",
        "dataset",
        "dataset_dir",
        "cutoff_len",
        "lora_rank",
        "lora_target",
    }
)

# The kind of value each key must hold for the tool to read it (else: an error naming it).
SHAPES: dict[str, tuple[type, ...]] = {
    "model_name_or_path": (str,),
    "stage": (str,),
    "finetuning_type": (str,),
    "dataset": (str, list),
    "eval_dataset": (str, list),
    "dataset_dir": (str,),
    "lora_target": (str, list),
    "additional_target": (str, list),
    "output_dir": (str,),
}


def looks_like(cfg: dict[str, Any]) -> bool:
    return "model_name_or_path" in cfg and bool(_OWN & cfg.keys())


def _names(value: Any) -> list[str]:
    """LLaMA-Factory's comma-separated lists (``lora_target: q_proj,v_proj``)."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value] if isinstance(value, list) else []


def read(path: Path, base: Path, draft: Draft) -> None:
    cfg = read_mapping(path, "LLaMA-Factory config")
    expect(cfg, path, SHAPES)
    source = model_source.relative(path, base)
    view = {**{k: d.value for k, d in LLAMAFACTORY.items()}, **cfg}
    _model(cfg, path, base, source, draft)
    _method(cfg, view, source, draft)
    _datasets(cfg, view, path, source, draft)
    stage = str(view["stage"])
    _checkpointing(cfg, source, draft)
    trainer = {k: d for k, d in TRAINER.items() if k != "activation_checkpointing"}
    used = trainer_args.apply(cfg, source, draft, defaults=trainer, tool="LLaMA-Factory")
    trainer_args.deepspeed(cfg.get("deepspeed"), path, source, draft)
    _data_side(cfg, view, stage, source, draft)
    if is_set(cfg.get("output_dir")):
        draft.put(("export", "path"), str(cfg["output_dir"]), source, "output_dir")
        lora = view["finetuning_type"] == "lora"
        draft.put(("export", "kind"), "adapter" if lora else "model", source, "finetuning_type")
    draft.unknown_keys(source, "LLaMA-Factory", sorted(k for k in cfg if k not in KNOWN))
    effective = KNOWN - BOOKKEEPING - MAPPED - trainer_args.BOOKKEEPING - used
    draft.not_carried(source, sorted(k for k in cfg if k in effective and is_set(cfg[k])))


def _take(cfg: dict[str, Any], key: str, source: str) -> tuple[Any, str, str, bool]:
    """(value, source or tool, key or file+key, is a default) for ``key``."""
    if key in cfg and cfg[key] is not None:
        return cfg[key], source, key, False
    d: Default = LLAMAFACTORY[key]
    return d.value, d.tool, d.where, True


def _put(draft: Draft, loc: tuple[str, ...], taken: tuple[Any, str, str, bool], value: Any) -> None:
    _, where, key, default = taken
    if default:
        draft.put_default(loc, value, where, key)
    else:
        draft.put(loc, value, where, key)


def _checkpointing(cfg: dict[str, Any], source: str, draft: Draft) -> None:
    """LLaMA-Factory turns gradient checkpointing on itself unless told not to
    (model/model_utils/checkpointing.py), whatever TrainingArguments says."""
    loc = ("training", "activation_checkpointing")
    if isinstance(cfg.get("disable_gradient_checkpointing"), bool):
        off = cfg["disable_gradient_checkpointing"]
        draft.put(loc, not off, source, "disable_gradient_checkpointing")
    else:
        draft.put_default(
            loc,
            True,
            "LLaMA-Factory",
            "hparams/model_args.py disable_gradient_checkpointing: false, so "
            "model_utils/checkpointing.py turns it on",
        )


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


def _method(cfg: dict[str, Any], view: dict[str, Any], source: str, draft: Draft) -> None:
    kind = view["finetuning_type"]
    m = ("method",)
    taken = _take(cfg, "finetuning_type", source)
    if kind in ("full", "freeze"):
        _put(draft, (*m, "kind"), taken, "full")
        if kind == "freeze":
            draft.notes.append(
                f"{source}: finetuning_type freeze trains only some layers: list the frozen "
                "ones in method.frozen_modules"
            )
        return
    if kind != "lora":
        draft.notes.append(f"{source}: finetuning_type {kind!r}: method not derived")
        return
    _put(draft, (*m, "kind"), taken, "lora")
    rank = _take(cfg, "lora_rank", source)
    _put(draft, (*m, "r"), rank, rank[0])
    if is_set(cfg.get("lora_alpha")):
        alpha = cfg["lora_alpha"]
        number = isinstance(alpha, (int, float)) and not isinstance(alpha, bool)
        draft.put((*m, "alpha"), float(alpha) if number else alpha, source, "lora_alpha")
    elif isinstance(rank[0], int) and not isinstance(rank[0], bool):
        d = LLAMAFACTORY_ALPHA
        draft.put_default(
            (*m, "alpha"), float(rank[0] * 2), d.tool, f"{d.where}: unset, lora_rank * 2"
        )
    dropout = _take(cfg, "lora_dropout", source)
    number = isinstance(dropout[0], (int, float)) and not isinstance(dropout[0], bool)
    _put(draft, (*m, "dropout"), dropout, float(dropout[0]) if number else dropout[0])
    target = _take(cfg, "lora_target", source)
    targets = _names(target[0])
    if targets == ["all"]:
        _put(draft, (*m, "target_modules"), target, "all-linear")
    elif targets:
        _put(draft, (*m, "target_modules"), target, sorted(set(targets)))
    extra = _names(cfg.get("additional_target"))
    if extra:
        draft.put((*m, "modules_to_save"), sorted(set(extra)), source, "additional_target")
    for key in ("use_rslora", "use_dora"):
        if isinstance(cfg.get(key), bool):
            draft.put((*m, key), cfg[key], source, key)


def _datasets(
    cfg: dict[str, Any], view: dict[str, Any], path: Path, source: str, draft: Draft
) -> None:
    folder_name = str(view["dataset_dir"])
    folder = find(path, folder_name)
    info: dict[str, Any] = {}
    if folder is not None and (folder / "dataset_info.json").is_file():
        info = read_mapping(folder / "dataset_info.json", "LLaMA-Factory dataset_info.json")
    for key, role in (("dataset", "train"), ("eval_dataset", "eval")):
        for name in _names(cfg.get(key)):
            entry = info.get(name)
            file_name = entry.get("file_name") if isinstance(entry, dict) else None
            hub = _hub_name(entry)
            if folder is not None and isinstance(file_name, str):
                draft.add_data(
                    folder / file_name, role, f"{source}: {key}", source, f"{key}: {name}"
                )
            elif hub is not None:
                draft.add_hub_data(hub, role, source, f"{key}: {name}")
            else:
                draft.notes.append(
                    f"{source}: {key} {name!r} is not in {folder_name}/dataset_info.json "
                    "(or that file is not found from here): pass its files with --from"
                )


def _hub_name(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return None
    for key in ("hf_hub_url", "ms_hub_url", "om_hub_url"):
        if isinstance(entry.get(key), str) and entry[key]:
            return str(entry[key])
    return None


def _data_side(
    cfg: dict[str, Any], view: dict[str, Any], stage: str, source: str, draft: Draft
) -> None:
    t = ("training",)
    cutoff = _take(cfg, "cutoff_len", source)
    _put(draft, (*t, "seq_len"), cutoff, cutoff[0])
    prompt = _take(cfg, "train_on_prompt", source)
    _put(draft, (*t, "loss_on"), prompt, "all" if prompt[0] is True else "completion")
    for key, policy in (("neat_packing", "block-diagonal"), ("packing", "none")):
        if cfg.get(key) is True:
            draft.put((*t, "packing", "enabled"), True, source, key)
            draft.put((*t, "packing", "mask_policy"), policy, source, key)
            break
    else:
        if cfg.get("packing") is None and stage == "pt":  # data_args.py: packing None -> pt
            draft.put_default(
                (*t, "packing", "enabled"),
                True,
                "LLaMA-Factory",
                "hparams/data_args.py packing (unset: on for stage pt)",
            )
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
    _preference(cfg, view, stage, source, draft)


def _preference(
    cfg: dict[str, Any], view: dict[str, Any], stage: str, source: str, draft: Draft
) -> None:
    kind = _STAGES.get(stage)
    if kind is None:
        draft.notes.append(f"{source}: stage {stage!r}: objective not derived")
        draft.fill(("training", "objective", "kind"), f"the objective of stage {stage}")
        return
    pref = str(view["pref_loss"])
    if kind == "dpo" and pref in _PREF_LOSS:
        kind = _PREF_LOSS[pref]
    o = ("training", "objective")
    draft.put((*o, "kind"), kind, source, "stage")
    if kind in ("dpo", "cpo"):
        taken = _take(cfg, "pref_loss", source)
        _put(draft, (*o, "loss_type"), taken, pref)
    if kind != "reward":
        beta = _take(cfg, "pref_beta", source)
        number = isinstance(beta[0], (int, float)) and not isinstance(beta[0], bool)
        _put(draft, (*o, "beta"), beta, float(beta[0]) if number else beta[0])
        draft.put(
            ("training", "loss_normalization"),
            "per-sequence",
            source,
            f"stage {stage}: the loss is averaged over preference pairs",
        )
