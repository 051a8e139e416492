"""Source: a TRL command-line config (YAML, ``trl sft --config sft_config.yaml``).

Layer: edges - authoring (reads one YAML file).  ``TrlParser`` (trl/scripts/utils.py)
sets the defaults of every dataclass of the command from the file's keys:
``ScriptArguments`` and ``DatasetMixtureConfig`` (the data), ``ModelConfig``
(the model and its LoRA: trainer/model_config.py), and the trainer's config
(``SFTConfig``, ``DPOConfig``..., whose keys ``trainer_args`` reads).  The
file does not say which command reads it: a trainer-only key, else a command
word in the file's name (``sft_config.yaml``, as TRL's docs name it), tells;
otherwise the objective is a FILL.  A key left out is TRL's default
(``defaults``), where it does not depend on the machine or the command.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ftmanifest.authoring import model_source, trainer_args
from ftmanifest.authoring.defaults import TRAINER, TRL_BASE, TRL_DPO, TRL_MODEL, TRL_SFT, Default
from ftmanifest.authoring.draft import Draft, is_set
from ftmanifest.authoring.formats import expect, find, read_mapping

SCRIPT = frozenset(
    "dataset_name dataset_config dataset_train_split dataset_test_split dataset_streaming "
    "ignore_bias_buffers datasets streaming test_split_size reward_funcs".split()
)
MODEL = frozenset(
    """
model_name_or_path model_revision dtype torch_dtype attn_implementation use_peft lora_r
lora_alpha lora_dropout lora_target_modules lora_target_parameters lora_modules_to_save
lora_task_type use_rslora use_dora load_in_8bit load_in_4bit bnb_4bit_quant_type
use_bnb_nested_quant bnb_4bit_quant_storage trust_remote_code
""".split()
)
# The `trl` command's own keys: the environment and accelerate's launch options.
LAUNCH = frozenset("env accelerate_config num_processes num_machines config".split())
KNOWN = SCRIPT | MODEL | LAUNCH | trainer_args.KNOWN
MAPPED = frozenset(
    "model_name_or_path model_revision attn_implementation use_peft lora_r lora_alpha "
    "lora_dropout lora_target_modules lora_modules_to_save use_rslora use_dora dataset_name "
    "datasets".split()
)
BOOKKEEPING = LAUNCH | {"dataset_streaming", "streaming", "trust_remote_code", "lora_task_type"}
_DPO_ONLY = frozenset(
    "beta precompute_ref_log_probs reference_free rpo_alpha ref_model_sync_steps "
    "ref_model_mixup_alpha sync_ref_model f_divergence_type loss_weights use_weighting".split()
)
_SFT_ONLY = frozenset(
    "dataset_text_field completion_only_loss assistant_only_loss packing packing_strategy "
    "eval_packing padding_free".split()
)
_COMMANDS = ("sft", "dpo", "kto", "reward", "grpo", "rloo")
_TABLES = {"sft": TRL_SFT, "dpo": TRL_DPO}

# The kind of value each key must hold for the tool to read it (else: an error naming it).
SHAPES: dict[str, tuple[type, ...]] = {
    "model_name_or_path": (str,),
    "dataset_name": (str,),
    "datasets": (list,),
    "lora_target_modules": (list, str),
    "lora_modules_to_save": (list,),
    "output_dir": (str,),
}


def looks_like(cfg: dict[str, Any]) -> bool:
    """A TRL CLI config: a ModelConfig model and TRL's own data or model keys."""
    own = {"dataset_name", "datasets", "use_peft", "lora_r", "dataset_train_split"}
    return "model_name_or_path" in cfg and bool(own & cfg.keys())


def read(path: Path, base: Path, draft: Draft) -> None:
    cfg = read_mapping(path, "TRL CLI config")
    expect(cfg, path, SHAPES)
    source = model_source.relative(path, base)
    kind, why = _command(cfg, path)
    o = ("training", "objective")
    if kind is None:
        draft.fill(
            (*o, "kind"),
            f"{' | '.join(_COMMANDS)}: the trl command that reads "
            f"{source} (trl sft --config {path.name} ...)",
        )
    else:
        draft.put((*o, "kind"), kind, source, why)
    table = {**TRAINER, **TRL_BASE, **_TABLES.get(kind or "", {})}
    if cfg.get("fp16") is True:
        table.pop("bf16")  # TRL's bf16 default is "true unless fp16 is set"
    if kind not in _TABLES:
        table.pop("learning_rate")  # each trainer's config sets its own
    used = trainer_args.apply(
        cfg, source, draft, kind=kind or "trainer", defaults=table, tool="trl"
    )
    trainer_args.deepspeed(cfg.get("deepspeed"), path, source, draft)
    _model(cfg, base, source, draft)
    _method(cfg, source, draft)
    _data(cfg, path, source, draft)
    if is_set(cfg.get("output_dir")):
        draft.put(("export", "path"), str(cfg["output_dir"]), source, "output_dir")
        adapter = cfg.get("use_peft") is True
        draft.put(("export", "kind"), "adapter" if adapter else "model", source, "use_peft")
    draft.unknown_keys(source, "TRL CLI", sorted(k for k in cfg if k not in KNOWN))
    quiet = MAPPED | BOOKKEEPING | trainer_args.BOOKKEEPING | used
    draft.not_carried(
        source, sorted(k for k in cfg if k not in quiet and k in KNOWN and is_set(cfg[k]))
    )


def _command(cfg: dict[str, Any], path: Path) -> tuple[str | None, str]:
    """The trl command this file is for, and what says so."""
    if _DPO_ONLY & cfg.keys():
        return "dpo", f"{sorted(_DPO_ONLY & cfg.keys())[0]} (a DPOConfig key)"
    if _SFT_ONLY & cfg.keys():
        return "sft", f"{sorted(_SFT_ONLY & cfg.keys())[0]} (an SFTConfig key)"
    if "reward_funcs" in cfg:
        return None, ""  # grpo or rloo: the file cannot tell
    words = set(re.split(r"[^a-z]+", path.stem.lower()))
    named = [c for c in _COMMANDS if c in words]
    if len(named) == 1:
        return named[0], f"the file name (trl {named[0]} --config {path.name})"
    return None, ""


def _model(cfg: dict[str, Any], base: Path, source: str, draft: Draft) -> None:
    if is_set(cfg.get("attn_implementation")):
        draft.put(
            ("model", "attn_implementation"),
            str(cfg["attn_implementation"]),
            source,
            "attn_implementation",
        )
    name = cfg.get("model_name_or_path")
    if not isinstance(name, str) or not name:
        return
    local = Path(name)
    if local.is_dir():
        model_source.read_folder(local, base, draft)
        return
    revision = cfg.get("model_revision")  # ModelConfig's default is main
    ref = f"{name}@{revision}" if is_set(revision) else name
    model_source.read_ref(ref, draft, source=source, key="model_name_or_path")


def _method(cfg: dict[str, Any], source: str, draft: Draft) -> None:
    m = ("method",)

    def take(key: str) -> tuple[Any, str, str, bool]:
        if cfg.get(key) is not None:
            return cfg[key], source, key, False
        d: Default = TRL_MODEL[key]
        return d.value, d.tool, d.where, True

    def put(loc: tuple[str, ...], key: str, value: Any = None) -> None:
        got, where, what, default = take(key)
        value = got if value is None else value
        (draft.put_default if default else draft.put)(loc, value, where, what)

    if take("use_peft")[0] is not True:
        put((*m, "kind"), "use_peft", "full")
        return
    put((*m, "kind"), "use_peft", "lora")
    put((*m, "r"), "lora_r")
    alpha = take("lora_alpha")[0]
    put((*m, "alpha"), "lora_alpha", float(alpha) if _number(alpha) else None)
    dropout = take("lora_dropout")[0]
    put((*m, "dropout"), "lora_dropout", float(dropout) if _number(dropout) else None)
    targets = cfg.get("lora_target_modules")
    if isinstance(targets, list) and targets:
        draft.put(
            (*m, "target_modules"), sorted({str(t) for t in targets}), source, "lora_target_modules"
        )
    elif is_set(targets):
        draft.put((*m, "target_modules"), targets, source, "lora_target_modules")
    else:
        draft.fill(
            (*m, "target_modules"),
            "the modules LoRA wraps: lora_target_modules is "
            "unset, so peft's default for the model's type applies (q_proj, v_proj for "
            "Llama and Qwen2); name them",
        )
    saved = cfg.get("lora_modules_to_save")
    if isinstance(saved, list) and saved:
        draft.put(
            (*m, "modules_to_save"), sorted({str(t) for t in saved}), source, "lora_modules_to_save"
        )
    for key in ("use_rslora", "use_dora"):
        if isinstance(cfg.get(key), bool):
            draft.put((*m, key), cfg[key], source, key)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _data(cfg: dict[str, Any], path: Path, source: str, draft: Draft) -> None:
    names: list[tuple[str, str]] = []
    if isinstance(cfg.get("dataset_name"), str):
        names.append((cfg["dataset_name"], "dataset_name"))
    for i, ds in enumerate(cfg.get("datasets") or []):
        if isinstance(ds, dict) and isinstance(ds.get("path"), str):
            names.append((ds["path"], f"datasets[{i}].path"))
        else:
            draft.notes.append(f"{source}: datasets[{i}] has no path: not read")
    for name, key in names:
        found = find(path, name)
        if found is not None:
            draft.add_data(found, "train", f"{source}: {key}", source, key)
        else:
            draft.add_hub_data(name, "train", source, key)
