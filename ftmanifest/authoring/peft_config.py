"""Source: a peft ``adapter_config.json`` or a ``LoraConfig`` saved as JSON.

Layer: edges - authoring (reads one JSON file).  Keys: the fields of peft 0.21's
``LoraConfig`` and of ``PeftConfig``/``PeftConfigMixin`` under it, as
``save_pretrained`` writes them (``peft/tuners/lora/config.py``,
``peft/config.py``).  A LoRA config becomes ``method: {kind: lora}`` field by
field; any other peft type becomes ``method: {kind: peft}`` with its config.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ftmanifest.authoring.draft import Draft, is_set
from ftmanifest.authoring.formats import read_mapping

LORA_CONFIG = frozenset(
    """
r target_modules exclude_modules lora_alpha lora_dropout fan_in_fan_out bias use_rslora
modules_to_save init_lora_weights layers_to_transform layers_pattern rank_pattern alpha_pattern
megatron_config megatron_core trainable_token_indices loftq_config eva_config corda_config
lora_ga_config use_dora velora_config alora_invocation_tokens use_qalora qalora_group_size
monteclora_config layer_replication runtime_config lora_bias target_parameters use_bdlora
arrow_config kasa_config ensure_weight_tying
""".split()
)
PEFT_CONFIG = frozenset(
    "base_model_name_or_path revision peft_type task_type inference_mode auto_mapping "
    "peft_version".split()
)
KNOWN = LORA_CONFIG | PEFT_CONFIG
BOOKKEEPING = frozenset({"task_type", "inference_mode", "auto_mapping", "peft_version"})

# peft's LoraConfig name -> the manifest's method field
LORA_FIELDS = {
    "r": "r",
    "lora_alpha": "alpha",
    "lora_dropout": "dropout",
    "target_modules": "target_modules",
    "exclude_modules": "exclude_modules",
    "modules_to_save": "modules_to_save",
    "bias": "bias",
    "use_rslora": "use_rslora",
    "use_dora": "use_dora",
    "fan_in_fan_out": "fan_in_fan_out",
    "rank_pattern": "rank_pattern",
    "alpha_pattern": "alpha_pattern",
    "init_lora_weights": "init",
    "layer_replication": "layer_replication",
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def looks_like(cfg: dict[str, Any]) -> bool:
    return "peft_type" in cfg or {"r", "lora_alpha", "target_modules"} <= cfg.keys()


def read(path: Path, base: Path, draft: Draft) -> None:
    cfg = read_mapping(path, "peft adapter config")
    source = path.name if path.name != "adapter_config.json" else f"{path.parent.name}/{path.name}"
    peft_type = str(cfg.get("peft_type") or "LORA").upper()
    if peft_type == "LORA":
        used = set(_lora(cfg, source, draft))
    else:
        config = {k: v for k, v in cfg.items() if k not in PEFT_CONFIG}
        draft.put(("method", "kind"), "peft", source, "peft_type")
        draft.put(("method", "peft_type"), peft_type, source, "peft_type")
        draft.put(("method", "config"), config, source, "(every key but the base model's)")
        used = set(cfg)
    _base(cfg, source, base, draft)
    if peft_type == "LORA":
        draft.unknown_keys(source, "LoraConfig", sorted(k for k in cfg if k not in KNOWN))
        draft.not_carried(
            source,
            sorted(
                k
                for k in cfg
                if k in LORA_CONFIG and k not in used and k not in LORA_FIELDS and is_set(cfg[k])
            ),
        )


def _lora(cfg: dict[str, Any], source: str, draft: Draft) -> list[str]:
    draft.put(("method", "kind"), "lora", source, "peft_type")
    used = []
    for key, name in LORA_FIELDS.items():
        value = cfg.get(key)
        if value is None:
            continue
        if key in ("target_modules", "exclude_modules", "modules_to_save") and isinstance(
            value, (list, tuple)
        ):
            value = sorted({str(v) for v in value})
            if not value:
                continue
        if key == "layer_replication" and not value:
            continue
        if key in ("rank_pattern", "alpha_pattern") and not value:
            continue
        if key == "lora_alpha" and isinstance(value, (int, float)):
            value = float(value)
        draft.put(("method", name), value, source, key)
        used.append(key)
    return used


def _base(cfg: dict[str, Any], source: str, base: Path, draft: Draft) -> None:
    name = cfg.get("base_model_name_or_path")
    if not isinstance(name, str) or not name:
        return
    if _HUB_ID.match(name) and not (base / name).exists():
        draft.put(("model", "repo"), name, source, "base_model_name_or_path")
        if is_set(cfg.get("revision")):
            draft.put(("model", "revision"), str(cfg["revision"]), source, "revision")
    else:
        draft.notes.append(
            f"{source}: base_model_name_or_path {name!r} is a local path on the machine that "
            "trained it: pass the base model's folder (or repo@revision) with --from"
        )
