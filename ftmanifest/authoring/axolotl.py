"""Source: an axolotl config (YAML).

Layer: edges - authoring (reads the config and looks up the files it names).  Keys as
axolotl's config schema declares them (``keys.AXOLOTL``); a key the config
leaves out is axolotl's default (``defaults.AXOLOTL``), where that default
does not depend on the machine.  Paths in it are taken relative to the
config's folder, then to the current one, as ``axolotl train CONFIG`` run
from either would find them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.authoring import keys, model_source, trainer_args
from ftmanifest.authoring.axolotl_training import number, training
from ftmanifest.authoring.defaults import AXOLOTL
from ftmanifest.authoring.draft import Draft, is_set
from ftmanifest.authoring.formats import expect, find, read_mapping
from ftmanifest.errors import InputError

MAPPED = frozenset(
    """
base_model model_revision revision_of_model datasets test_datasets val_set_size adapter lora_r
lora_alpha lora_dropout lora_target_modules lora_target_linear lora_modules_to_save
lora_fan_in_fan_out peft_use_rslora peft_use_dora peft_layer_replication sequence_len
micro_batch_size gradient_accumulation_steps num_epochs max_steps learning_rate optimizer
lr_scheduler warmup_steps warmup_ratio weight_decay adam_beta1 adam_beta2 adam_epsilon
max_grad_norm seed bf16 fp16 tf32 gradient_checkpointing sample_packing train_on_inputs output_dir
fsdp fsdp_config deepspeed rl rl_beta dpo_beta attn_implementation flash_attention sdp_attention
""".split()
)
# Documented keys about logging, saving, evaluating, the hardware and bookkeeping:
# they change how a run is watched or fed, not what an optimizer step computes.
BOOKKEEPING = frozenset(
    """
base_model_ignore_patterns is_falcon_derived_model is_llama_derived_model is_qwen_derived_model
is_mistral_derived_model gpu_memory_limit lora_on_cpu dataset_prepared_path push_dataset_to_hub
dataset_processes dataset_num_proc dataset_keep_in_memory hub_model_id hub_strategy hub_revision
hf_use_auth_token dataset_shard_num dataset_shard_idx device_map max_memory wandb_mode
wandb_project wandb_entity wandb_watch wandb_name wandb_run_id wandb_log_model
mlflow_tracking_uri mlflow_experiment_name mlflow_run_name hf_mlflow_log_artifacts use_comet
comet_api_key comet_workspace comet_project_name comet_experiment_key comet_mode comet_online
comet_experiment_config use_tensorboard use_trackio trackio_project_name trackio_run_name
trackio_space_id torch_compile torch_compile_backend torch_compile_mode eval_batch_size
logging_steps eval_steps evals_per_epoch eval_strategy save_strategy save_steps saves_per_epoch
save_total_limit save_only_model save_first_step include_tokens_per_second include_tkps
auto_find_batch_size eval_table_size eval_max_new_tokens do_causal_lm_eval eval_causal_lm_metrics
profiler_steps loss_watchdog_threshold loss_watchdog_patience save_safetensors
early_stopping_patience flash_optimum low_cpu_mem_usage resume_from_checkpoint
auto_resume_from_checkpoints local_rank ddp_timeout torchdistx_path debug strict
dataloader_num_workers dataloader_pin_memory dataloader_prefetch_factor dataloader_drop_last
eval_sample_packing gradient_checkpointing_kwargs lora_model_dir use_ray ray_num_workers
ray_run_name ray_resources_per_worker use_otel_metrics otel_metrics_host otel_metrics_port
""".split()
)
# Older documented keys axolotl has since dropped: still read as known.
FORMER = frozenset(
    "flash_attn_fuse_qkv random_init_weights relora_steps relora_warmup_steps "
    "relora_anneal_steps debug".split()
)
KNOWN = keys.AXOLOTL | MAPPED | BOOKKEEPING | FORMER
DATASET_KEYS = keys.AXOLOTL_DATASET | {"train_on_split"}
# The kind of value each key must hold for the tool to read it (else: an error naming it).
SHAPES: dict[str, tuple[type, ...]] = {
    "base_model": (str,),
    "datasets": (list,),
    "test_datasets": (list,),
    "lora_target_modules": (list, str),
    "lora_modules_to_save": (list,),
    "rl": (str,),
    "adapter": (str,),
    "output_dir": (str,),
}


def looks_like(cfg: dict[str, Any]) -> bool:
    return "base_model" in cfg


def read(path: Path, base: Path, draft: Draft) -> None:
    cfg = read_mapping(path, "axolotl config")
    expect(cfg, path, SHAPES)
    source = model_source.relative(path, base)
    put = _putter(cfg, source, draft)
    _model(cfg, path, base, source, draft)
    _datasets(cfg, path, source, draft)
    _method(cfg, put, source, draft)
    training(cfg, put, source, draft)
    trainer_args.deepspeed(cfg.get("deepspeed"), path, source, draft)
    draft.unknown_keys(source, "axolotl", sorted(k for k in cfg if k not in KNOWN))
    effective = KNOWN - MAPPED - BOOKKEEPING
    draft.not_carried(source, sorted(k for k in cfg if k in effective and is_set(cfg[k])))


def _putter(cfg: dict[str, Any], source: str, draft: Draft) -> Any:
    """put(loc, key, value): the config's value (or ``value`` made from it), else
    axolotl's documented default for that key."""

    def put(loc: tuple[str, ...], key: str, value: Any = None) -> None:
        if is_set(cfg.get(key)) or (key in cfg and cfg[key] in (0, False)):
            draft.put(loc, cfg[key] if value is None else value, source, key)
        elif key in AXOLOTL and cfg.get(key) is None:
            d = AXOLOTL[key]
            draft.put_default(loc, d.value if value is None else value, d.tool, d.where)

    return put


def _model(cfg: dict[str, Any], path: Path, base: Path, source: str, draft: Draft) -> None:
    if is_set(cfg.get("attn_implementation")):
        draft.put(
            ("model", "attn_implementation"),
            str(cfg["attn_implementation"]),
            source,
            "attn_implementation",
        )
    elif cfg.get("flash_attention") is True:
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
    key = "model_revision" if is_set(cfg.get("model_revision")) else "revision_of_model"
    revision = cfg.get(key)
    ref = f"{name}@{revision}" if is_set(revision) else name
    model_source.read_ref(ref, draft, source=source, key="base_model")


def _datasets(cfg: dict[str, Any], path: Path, source: str, draft: Draft) -> None:
    for key, role in (("datasets", "train"), ("test_datasets", "eval")):
        for i, ds in enumerate(cfg.get(key) or []):
            where = f"{key}[{i}]"
            if isinstance(ds, str):
                ds = {"path": ds}
            if not isinstance(ds, dict):
                raise InputError(
                    f"{where} is not a dataset entry",
                    path=str(path),
                    field=where,
                    expected="a mapping with path: (and type:)",
                    observed=repr(ds)[:160],
                    hint=f"fix {where} in {path.name}",
                )
            expect(ds, path, {"path": (str,), "data_files": (str, list)})
            draft.unknown_keys(
                source, f"axolotl {key}[]", sorted(str(k) for k in ds if k not in DATASET_KEYS)
            )
            files = ds.get("data_files") or ds.get("path")
            field = "data_files" if ds.get("data_files") else "path"
            for j, name in enumerate([files] if isinstance(files, str) else files or []):
                at = f"{where}.{field}" + (f"[{j}]" if not isinstance(files, str) else "")
                found = find(path, str(name))
                if found is not None:
                    draft.add_data(found, role, f"{source}: {key}", source, at)
                elif field == "path" and "/" in str(name) and not str(name).startswith("."):
                    draft.add_hub_data(str(name), role, source, at)  # org/name: a hub dataset
                else:
                    draft.notes.append(
                        f"{source}: {at} {name!r} is not found here: pass its file with --from"
                    )
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
    if adapter == "qlora" or cfg.get("load_in_4bit") or cfg.get("load_in_8bit"):
        draft.notes.append(
            f"{source}: the base model is loaded quantised (adapter {adapter}, load_in_4bit/"
            "load_in_8bit): the quantisation has no manifest field; name it in the hypothesis"
        )
    m = ("method",)
    draft.put((*m, "kind"), "lora", source, "adapter")
    put((*m, "r"), "lora_r")  # a value the schema refuses is an error naming this key
    put((*m, "alpha"), "lora_alpha", number(cfg.get("lora_alpha")))
    put((*m, "dropout"), "lora_dropout", number(cfg.get("lora_dropout")))
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
        if key in cfg:
            put((*m, name), key)
