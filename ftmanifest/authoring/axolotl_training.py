"""Source: an axolotl config (YAML), its training section: sizing, optimizer, seeds, objective.

Layer: edges - authoring.  ``axolotl.read`` calls ``training`` with its ``put``: the
config's value for a key, else axolotl's documented default (``defaults.AXOLOTL``).
What axolotl decides from the machine or the run (``bf16: auto``, warm-up as a
share of the steps) is a FILL.
"""

from __future__ import annotations

from typing import Any

from ftmanifest.authoring.draft import Draft, is_set

_RL = {
    "dpo": ("dpo", None),
    "ipo": ("dpo", "ipo"),
    "kto": ("kto", None),
    "orpo": ("orpo", None),
    "simpo": ("cpo", "simpo"),
    "grpo": ("grpo", None),
}


def number(value: Any) -> float | None:
    """A YAML number; PyYAML reads ``2e-5`` (no dot) as a string."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def training(cfg: dict[str, Any], put: Any, source: str, draft: Draft) -> None:
    t, opt = ("training",), ("training", "optimizer")
    put((*t, "seq_len"), "sequence_len")
    put((*t, "micro_batch"), "micro_batch_size")
    put((*t, "grad_accum"), "gradient_accumulation_steps")
    if is_set(cfg.get("max_steps")):
        put((*t, "max_steps"), "max_steps")
    else:
        put((*t, "epochs"), "num_epochs", number(cfg.get("num_epochs")))
    put((*opt, "name"), "optimizer")
    put((*opt, "lr"), "learning_rate", number(cfg.get("learning_rate")))
    put((*opt, "weight_decay"), "weight_decay", number(cfg.get("weight_decay")))
    put((*opt, "schedule"), "lr_scheduler")
    _warmup(cfg, put, source, draft)
    b1, b2 = number(cfg.get("adam_beta1")), number(cfg.get("adam_beta2"))
    if b1 is not None and b2 is not None:
        put((*opt, "betas"), "adam_beta1", [b1, b2])
    if number(cfg.get("adam_epsilon")):
        put((*opt, "eps"), "adam_epsilon", number(cfg["adam_epsilon"]))
    if number(cfg.get("max_grad_norm")) is not None:
        put((*t, "max_grad_norm"), "max_grad_norm", number(cfg["max_grad_norm"]))
    for name in ("python", "numpy", "torch", "data_order"):
        put(("seeds", name), "seed")
    _precision(cfg, put, source, draft)
    put(
        (*t, "activation_checkpointing"),
        "gradient_checkpointing",
        None if "gradient_checkpointing" not in cfg else is_set(cfg["gradient_checkpointing"]),
    )
    packing = cfg.get("sample_packing")
    put(
        (*t, "packing", "enabled"), "sample_packing", bool(packing) if packing is not None else None
    )
    if packing:
        put((*t, "packing", "mask_policy"), "sample_packing", "block-diagonal")
    on_inputs = cfg.get("train_on_inputs")
    put((*t, "loss_on"), "train_on_inputs", "all" if on_inputs else "completion")
    _objective(cfg, put, source, draft)
    if is_set(cfg.get("output_dir")):
        put(("export", "path"), "output_dir", str(cfg["output_dir"]))
        kind = "adapter" if cfg.get("adapter") in ("lora", "qlora") else "model"
        draft.put(("export", "kind"), kind, source, "adapter")
    if is_set(cfg.get("fsdp")) or is_set(cfg.get("fsdp_config")):
        put(
            ("distributed", "strategy"),
            "fsdp" if is_set(cfg.get("fsdp")) else "fsdp_config",
            "fsdp",
        )


def _warmup(cfg: dict[str, Any], put: Any, source: str, draft: Draft) -> None:
    """axolotl warms up over warmup_steps, else warmup_ratio of the run, else 3% of
    it up to 100 steps (core/builders/base.py): only the first is steps already."""
    if is_set(cfg.get("warmup_steps")) or cfg.get("warmup_steps") == 0:
        steps = number(cfg["warmup_steps"])
        put(
            ("training", "optimizer", "warmup_steps"),
            "warmup_steps",
            int(steps) if steps is not None and steps.is_integer() else None,
        )
        return
    ratio = number(cfg.get("warmup_ratio"))
    share = (
        f"warmup_ratio {ratio:g} of the run's"
        if ratio is not None
        else ("axolotl's default, 3% (at most 100) of the run's")
    )
    draft.fill(
        ("training", "optimizer", "warmup_steps"),
        f"warm-up steps: {source} warms up over {share} optimizer steps; write that many steps",
    )


def _precision(cfg: dict[str, Any], put: Any, source: str, draft: Draft) -> None:
    for key in ("bf16", "fp16"):
        if cfg.get(key) in (True, "full"):
            put(("training", "precision"), key, key)
            return
    auto = next((k for k in ("bf16", "fp16") if cfg.get(k) == "auto"), None)
    if auto is not None or cfg.get("bf16") is None:  # unset: axolotl's default is auto
        said = f"{auto}: auto" if auto else "nothing, so bf16: auto (axolotl's default)"
        draft.fill(
            ("training", "precision"),
            f"bf16 | fp16 | fp32: {source} says {said}, "
            "which uses it only where the GPU that trains supports it",
        )
    elif cfg.get("tf32") is True:
        put(("training", "precision"), "tf32", "tf32")
    else:
        put(("training", "precision"), "bf16", "fp32")


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
        if number(cfg.get(key)) is not None:
            put((*o, "beta"), key, number(cfg[key]))
    if kind in ("dpo", "cpo", "orpo", "kto"):
        draft.put(
            ("training", "loss_normalization"),
            "per-sequence",
            source,
            f"rl: {rl}: the loss is averaged over preference pairs",
        )
