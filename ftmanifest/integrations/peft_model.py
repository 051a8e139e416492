"""The model as it will compute: its peft adapter, resolved, against the manifest's method.

Layer: edges - integrations (edge: torch, transformers and peft imported inside the
functions only).  The Trainer guard calls ``judge_peft_model`` before the first
optimizer step, so a run that would train another method than the signed one
is refused before it trains, not at its first save.

``resolved_peft`` reads the live model, not its config alone: the modules that
really carry an adapter (peft's ``BaseTunerLayer`` instances, named relative to
the base model), each one's rank, alpha, scaling and dropout as the layer holds
them, the ``modules_to_save`` copies, and which parameters will train.
``judge_peft_model`` compares that with ``method`` through the same resolver
as ``lint``, ``bind`` and ``check-adapter`` (``manifest.targets``, on the live
base's module tree) and the same comparison (``adapter.method``), so
``all-linear``, a regex and its explicit expansion agree everywhere.  Rows are
``drift.method`` findings at ``method.<field>``:

* a peft model under ``method: full`` (or no method), a plain model under
  ``kind: lora``/``kind: peft``, another PEFT method than declared: one row
  at ``method.kind`` naming both;
* LoRA: every ``adapter.method`` difference (wrapped modules, missing and
  extra named; r/alpha/scaling/dropout per module; rank and alpha patterns;
  rsLoRA, DoRA, bias, init, layer replication, ``fan_in_fan_out``,
  ``modules_to_save``, ``exclude_modules``; settings the manifest cannot state);
* another PEFT method: ``peft_type`` and every key of ``method.config``;
* trainable parameters: with an adapter only the adapter's own parameters,
  its ``modules_to_save`` copies and the biases ``bias`` names train, and all
  of those do; under ``method: full`` everything trains but ``frozen_modules``;
  ``trainable_params``, when pinned, is the count.

What cannot be read is a row too (``method``), never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.adapter import method as methods
from ftmanifest.findings import Finding
from ftmanifest.manifest import targets as tg
from ftmanifest.manifest.model import Manifest

RULE = "drift.method"
SHOWN = 3


@dataclass
class Observed:
    """What a live model's adapter is (``resolved_peft`` is its JSON form)."""

    is_peft: bool = False
    peft_type: str | None = None
    adapter: str | None = None
    adapters: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    tree: tg.Tree = field(default_factory=lambda: tg.Tree((), None))
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)  # wrapped, in tree order
    saved: list[str] = field(default_factory=list)
    trainable: list[str] = field(default_factory=list)  # names of trainable parameters
    frozen: list[str] = field(default_factory=list)
    adapter_params: set[str] = field(default_factory=set)  # the active adapter's own
    saved_params: set[str] = field(default_factory=set)  # modules_to_save copies, tokens...
    lora_biases: set[str] = field(default_factory=set)  # biases of the LoRA-wrapped layers
    trainable_count: int = 0
    total_count: int = 0


def _unwrap(model: Any) -> Any:
    for _ in range(8):  # DDP / DataParallel / torch.compile around the model
        if type(model).__name__ in ("DistributedDataParallel", "DataParallel") and hasattr(
            model, "module"
        ):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            break
    return model


def _kind(module: Any) -> str:
    """The kind peft's LoRA dispatch sees (a tuner layer's or wrapper's base layer)."""
    import torch.nn as nn
    from peft.tuners.tuners_utils import BaseTunerLayer
    from peft.utils.other import AuxiliaryTrainingWrapper
    from transformers.pytorch_utils import Conv1D

    if isinstance(module, BaseTunerLayer):
        module = module.get_base_layer()
    if isinstance(module, AuxiliaryTrainingWrapper):
        module = module.original_module
    if isinstance(module, nn.Embedding):
        return tg.EMBEDDING
    if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.MultiheadAttention)):
        return tg.CONV
    if isinstance(module, nn.Linear):
        return tg.LINEAR
    if isinstance(module, Conv1D):
        return tg.CONV1D
    return tg.OTHER


def _parts(model: Any) -> tuple[Any, dict[str, Any], list[str]]:
    """(the base model, its peft configs by adapter name, the active adapters)."""
    from peft import PeftModel
    from peft.tuners.tuners_utils import BaseTuner

    if isinstance(model, PeftModel):
        inner = model.base_model
        base = inner.model if isinstance(inner, BaseTuner) else inner
        active = model.active_adapters
        return base, dict(model.peft_config), list(active)
    if isinstance(model, BaseTuner):
        return model.model, dict(model.peft_config), list(model.active_adapters)
    configs = getattr(model, "peft_config", None)
    if getattr(model, "_hf_peft_config_loaded", False) and isinstance(configs, dict):
        active = model.active_adapters() if callable(model.active_adapters) else []
        return model, dict(configs), list(active)
    return model, {}, []


def _output_name(base: Any) -> str | None:
    from transformers import PreTrainedModel

    if not isinstance(base, PreTrainedModel):
        return None  # peft's all-linear keeps every layer of a plain nn.Module
    head = base.get_output_embeddings()
    if head is None:
        return None
    return next((n for n, m in base.named_modules() if m is head), None)


def _layer_facts(module: Any, adapter: str) -> dict[str, Any] | None:
    """What one tuner layer computes for ``adapter`` (None: it has no such adapter)."""
    from peft.tuners.lora import LoraLayer

    if isinstance(module, LoraLayer):
        if adapter not in module.r:
            return None
        drop = module.lora_dropout[adapter] if adapter in module.lora_dropout else None
        return {
            "type": type(module).__name__,
            "kind": _kind(module),
            "r": int(module.r[adapter]),
            "alpha": float(module.lora_alpha[adapter]),
            "scaling": float(module.scaling[adapter]),
            "dropout": float(getattr(drop, "p", 0.0)),
            "use_dora": adapter in module.lora_magnitude_vector,
            "use_rslora": bool(module.use_rslora.get(adapter, False)),
            "lora_bias": bool(module.lora_bias.get(adapter, False)),
            "fan_in_fan_out": bool(getattr(module, "fan_in_fan_out", False)),
        }
    names = tuple(getattr(module, "adapter_layer_names", ()))
    if not any(adapter in getattr(module, n, {}) for n in names):
        return None
    return {"type": type(module).__name__, "kind": _kind(module)}


def _own_params(module: Any, prefix: str, adapter: str) -> set[str]:
    """Names of a tuner layer's parameters that belong to ``adapter``."""
    out: set[str] = set()
    for attr in getattr(module, "adapter_layer_names", ()):
        holder = getattr(module, attr, None)
        if holder is None or adapter not in holder:
            continue
        item = holder[adapter]
        if hasattr(item, "named_parameters"):
            out.update(f"{prefix}{attr}.{adapter}.{n}" for n, _ in item.named_parameters())
        else:
            out.add(f"{prefix}{attr}.{adapter}")
    return out


def observe(model: Any) -> Observed:
    """Read ``model`` (a PeftModel, a transformers model with adapters added,
    or a plain model) as it will compute."""
    from peft.tuners.tuners_utils import BaseTunerLayer
    from peft.utils.other import AuxiliaryTrainingWrapper

    model = _unwrap(model)
    base, configs, active = _parts(model)
    obs = Observed(adapters=sorted(configs))
    adapter = active[0] if active else (sorted(configs)[0] if configs else "default")
    obs.adapter = adapter if configs else None
    if configs:
        config = configs.get(adapter)
        obs.config = methods.plain(config.to_dict()) if config is not None else {}
        obs.peft_type = methods.peft_type_of(obs.config)
    modules: list[tuple[str, str]] = []
    inside: list[str] = []
    for name, module in base.named_modules():
        if any(name.startswith(p) for p in inside):
            continue
        if isinstance(module, (BaseTunerLayer, AuxiliaryTrainingWrapper)) and name:
            inside.append(name + ".")
            obs.is_peft = True
        if name:
            modules.append((name, _kind(module)))
        if isinstance(module, BaseTunerLayer):
            facts = _layer_facts(module, adapter)
            if facts is not None:
                obs.modules[name] = facts
                obs.adapter_params |= _own_params(module, f"{name}.", adapter)
                own = module.get_base_layer().named_parameters()
                obs.lora_biases |= {f"{name}.base_layer.{n}" for n, _ in own if n == "bias"}
        elif isinstance(module, AuxiliaryTrainingWrapper):
            obs.saved.append(name)
            original = {id(p) for p in module.original_module.parameters()}
            obs.saved_params |= {f"{name}.{n}" for n, p in module.named_parameters()
                                 if id(p) not in original}  # fmt: skip
    obs.is_peft = obs.is_peft or bool(configs)
    obs.tree = tg.tree(modules, _output_name(base))
    _count(model, base, obs)
    return obs


def _count(model: Any, base: Any, obs: Observed) -> None:
    """Trainable and frozen parameters, named relative to the base model
    (a prompt encoder's outside it keep the PeftModel's names)."""
    in_base = {id(p): n for n, p in base.named_parameters()}
    for name, p in model.named_parameters():
        label = in_base.get(id(p), name)
        obs.total_count += p.numel()
        if p.requires_grad:
            obs.trainable.append(label)
            obs.trainable_count += p.numel()
        else:
            obs.frozen.append(label)
        if id(p) not in in_base:  # prompt learning: the prompt encoder is the adapter
            obs.adapter_params.add(label)


def resolved_peft(model: Any) -> dict[str, Any]:
    """JSON-able facts of ``model`` as it will compute (see the module doc)."""
    obs = observe(model)
    cfg = obs.config
    return {
        "peft": obs.is_peft,
        "peft_type": obs.peft_type,
        "adapter": obs.adapter,
        "adapters": obs.adapters,
        "wrapped": list(obs.modules),
        "modules": obs.modules,
        "modules_to_save": obs.saved,
        "use_rslora": cfg.get("use_rslora"),
        "use_dora": cfg.get("use_dora"),
        "bias": cfg.get("bias"),
        "init_lora_weights": cfg.get("init_lora_weights"),
        "layer_replication": cfg.get("layer_replication"),
        "fan_in_fan_out": cfg.get("fan_in_fan_out"),
        "config": cfg,
        "trainable_params": obs.trainable_count,
        "total_params": obs.total_count,
    }


def _names(items: list[str]) -> str:
    more = f" (and {len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def judge_peft_model(
    model: Any, manifest: Manifest, manifest_path: str | Path, *, resumed: bool = False
) -> list[Finding]:
    """``drift.method`` rows where ``model`` would train otherwise than the
    manifest's ``method`` says (``manifest``: the model or a LoadedManifest).

    TRL's frozen reference copy of the adapter is not a second adapter
    (``reference.trl_reference_adapter``; ``resumed``: the copy may differ from
    the adapter a checkpoint restored)."""
    m = getattr(manifest, "manifest", manifest)
    method, where = m.method, str(manifest_path)

    def row(loc: tuple[str, ...], message: str, expected: Any, observed: Any, hint: str,
            **extra: Any) -> Finding:  # fmt: skip
        kw: dict[str, Any] = {"extra": extra} if extra else {}
        return Finding.at(
            ("method", *loc), kind="drift", rule=RULE, message=message, path=where,
            expected=str(expected), observed=str(observed), hint=hint, **kw,
        )  # fmt: skip

    try:
        obs = observe(model)
    except Exception as exc:  # noqa: BLE001 -- not judged is never clean
        return [row((), "the model's adapters could not be read", "a model peft can describe",
                    f"{type(exc).__name__}: {exc}", "train a transformers or peft model; "
                    "report this if it is one")]  # fmt: skip
    kind = getattr(method, "kind", None)
    if not obs.is_peft:
        if kind in ("lora", "peft"):
            return [row(("kind",), f"the model has no adapter and the manifest declares "
                        f"{methods.declared(method)}", methods.declared(method),
                        "a plain model (no peft adapter)", "wrap it before the Trainer: "
                        "get_peft_model(model, lora_config(M))")]  # fmt: skip
        return _full_rows(obs, method, row) if kind == "full" else []
    from ftmanifest.integrations.reference import trl_reference_adapter

    copy = trl_reference_adapter(_unwrap(model), obs.adapters, obs.adapter, same=not resumed)
    if len([a for a in obs.adapters if a != copy]) > 1:
        return [row((), f"the model carries {len(obs.adapters)} adapters and the manifest "
                    "describes one", "one adapter", ", ".join(obs.adapters),
                    "delete the others (model.delete_adapter) before training")]  # fmt: skip
    peft_type = obs.peft_type or "an unknown peft method"
    if not methods.kind_fits(peft_type, method):
        return [row(("kind",), f"the model is {peft_type} and the manifest declares "
                    f"{methods.declared(method)}", methods.declared(method),
                    f"a {peft_type} peft model", _declare_hint(peft_type, where))]  # fmt: skip
    out: list[Finding] = []
    fix = f"build the config from the manifest: lora_config({where!r}), or edit method in {where}"
    if kind == "lora":
        out += [row(d.loc, d.message, d.expected, d.observed, d.hint or fix, **d.extra)
                for d in _lora_differences(obs, method)]  # fmt: skip
    else:
        out += [row(d.loc, d.message, d.expected, d.observed, d.hint or f"edit method.config in "
                    f"{where}, or build the model's config from it")
                for d in methods.peft_differences(method, obs.config, who="the model")]  # fmt: skip
    return out + _adapter_training_rows(obs, method, row)


def _declare_hint(peft_type: str, where: str) -> str:
    if peft_type == "LORA":
        return f"declare method.kind: lora with the model's r, alpha and target_modules in {where}"
    return (
        f"declare it in {where}: method: {{kind: peft, peft_type: {peft_type}, "
        "config: {...}}, or build the model from the manifest's method"
    )


def _lora_differences(obs: Observed, method: Any) -> list[methods.Difference]:
    """The manifest's spec resolved on the live base's tree, against the
    modules the model really wraps (their own r/alpha/scaling/dropout)."""
    expected = tg.resolve(tg.spec_from_method(method), obs.tree, replicated=True)
    from_config = tg.resolve(tg.spec_from_config(obs.config), obs.tree, replicated=True)
    lora = {n: f for n, f in obs.modules.items() if "r" in f}
    observed = from_config._replace(
        wrapped=tuple(obs.modules),
        r={n: f["r"] for n, f in lora.items()},
        alpha={n: f["alpha"] for n, f in lora.items()},
        scaling={n: f["scaling"] for n, f in lora.items()},
        saved=tuple(obs.saved),
    )
    missing = [n for n in obs.modules if n not in lora]
    if missing:  # a tuner layer of another kind inside a LoRA model
        observed = observed._replace(wrapped=tuple(lora))
    dropout = {n: f["dropout"] for n, f in lora.items()}
    return methods.lora_differences(method, obs.config, expected, observed, who="the model",
                                    observed_dropout=dropout)  # fmt: skip


def _adapter_training_rows(obs: Observed, method: Any, row: Any) -> list[Finding]:
    """With an adapter, exactly the adapter (and what it saves) trains."""
    bias = obs.config.get("bias", "none")
    allowed = obs.adapter_params | obs.saved_params
    if bias == "all":
        allowed |= {n for n in obs.trainable + obs.frozen if n.endswith(".bias")}
    elif bias == "lora_only":
        allowed |= obs.lora_biases
    out: list[Finding] = []
    extra = sorted(n for n in obs.trainable if n not in allowed)
    if extra:
        out.append(row(("trainable_params",), "parameters outside the adapter will train",
                       "only the adapter's parameters (and modules_to_save, bias as declared)",
                       _names(extra), "freeze them (get_peft_model freezes the base; something "
                       "unfroze these), or declare them in method.modules_to_save",
                       parameters=extra))  # fmt: skip
    frozen = sorted(n for n in obs.frozen if n in obs.adapter_params | obs.saved_params)
    if frozen:
        out.append(row(("trainable_params",), "the adapter's own parameters are frozen: they "
                       "will not train", "every adapter parameter trainable", _names(frozen),
                       "build the adapter for training (inference_mode=False), or do not "
                       "freeze its parameters", parameters=frozen))  # fmt: skip
    pinned = getattr(method, "trainable_params", None)
    if pinned is not None and pinned != obs.trainable_count:
        out.append(row(("trainable_params",), "the model trains another number of parameters "
                       "than method.trainable_params", pinned, obs.trainable_count,
                       f"set method.trainable_params: {obs.trainable_count}, or train what the "
                       "manifest says"))  # fmt: skip
    return out


def _under(name: str, entries: list[str]) -> bool:
    parts = name.split(".")[:-1]
    chain = [".".join(parts[: i + 1]) for i in range(len(parts))]
    return any(c == e or c.endswith(f".{e}") for c in chain for e in entries)


def _full_rows(obs: Observed, method: Any, row: Any) -> list[Finding]:
    """Full fine-tuning: every parameter trains but those of ``frozen_modules``."""
    frozen_mods = list(method.frozen_modules)
    out: list[Finding] = []
    names = [n for n, _ in obs.tree.modules]
    unknown = [e for e in frozen_mods if not any(n == e or n.endswith(f".{e}") for n in names)]
    if unknown:
        out.append(row(("frozen_modules",), "method.frozen_modules names modules the model "
                       "does not have", "modules of the model", _names(unknown),
                       "name modules the model has (a name or a '.'-suffix of one)"))  # fmt: skip
    thawed = sorted(n for n in obs.trainable if _under(n, frozen_mods))
    if thawed:
        out.append(row(("frozen_modules",), "parameters of method.frozen_modules will train",
                       "frozen", _names(thawed), "freeze them (requires_grad_(False)) before "
                       "the Trainer", parameters=thawed))  # fmt: skip
    idle = sorted(n for n in obs.frozen if not _under(n, frozen_mods))
    if idle:
        out.append(row(("frozen_modules",), "parameters outside method.frozen_modules are "
                       "frozen: full fine-tuning trains them", "trainable", _names(idle),
                       "unfreeze them, or add their modules to method.frozen_modules",
                       parameters=idle))  # fmt: skip
    pinned = method.trainable_params
    if pinned is not None and pinned != obs.trainable_count:
        out.append(row(("trainable_params",), "the model trains another number of parameters "
                       "than method.trainable_params", pinned, obs.trainable_count,
                       f"set method.trainable_params: {obs.trainable_count}, or freeze what "
                       "the manifest says"))  # fmt: skip
    return out
