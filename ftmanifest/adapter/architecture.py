"""Which modules a LoRA adapter wraps, and which tensors it must hold, from headers.

Layer: pure core (takes tensor shapes and configs, returns findings).  Used by
``check-adapter`` on a saved adapter and, without one, to judge a manifest's
``method`` against its pinned base (target modules exist, trainable count).

peft's rules, as peft 0.21 applies them (``tuners_utils.check_target_module_exists``):
a module matches a ``target_modules`` list when its name equals an entry or
ends with ``.entry``; a string is a regular expression that must match the
whole name (``all-linear``: every 2-D weight but embeddings and the output
head, as peft resolves it); ``exclude_modules`` (same rules) and modules named in
``modules_to_save`` are never wrapped.  Module names come from tensor names
(``a.b.weight`` is module ``a.b``); a LoRA-wrappable module owns a 2-D
``weight``.  Shapes: a Linear weight is ``[out, in]``, a GPT-2 ``Conv1D``
weight ``[in, out]`` (peft's ``fan_in_fan_out``), an Embedding ``[num, dim]``;
LoRA adds ``lora_A [r, in]`` and ``lora_B [out, r]`` (embeddings:
``lora_embedding_A [r, num]``, ``lora_embedding_B [dim, r]``), DoRA a
``lora_magnitude_vector [out]``.  The adapter's keys are peft's
(``base_model.model.<module>...``); a checkpoint saved without its task head
prefix (hub ``gpt2``: ``h.0...`` for module ``transformer.h.0...``) is matched
by dropping the first name component.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ftmanifest.findings import Finding

if TYPE_CHECKING:
    from ftmanifest.findings import Severity

Shapes = Mapping[str, tuple[str, tuple[int, ...]]]
PEFT_PREFIX = "base_model.model."
CONV1D_MODEL_TYPES = frozenset({"gpt2", "openai-gpt", "imagegpt", "decision_transformer"})
EMBEDDING_NAMES = frozenset({"wte", "wpe", "embed_tokens", "embed_in", "word_embeddings"})
OUTPUT_NAMES = frozenset({"lm_head", "embed_out", "output"})
ALL_LINEAR = "all-linear"  # peft's INCLUDE_LINEAR_LAYERS_SHORTHAND
_LORA_PARTS = ("lora_A.weight", "lora_B.weight", "lora_B.bias", "lora_embedding_A",
               "lora_embedding_B", "lora_magnitude_vector", "base_layer.weight")  # fmt: skip


@dataclass(frozen=True)
class LoraFacts:
    """The LoRA settings that decide which tensors an adapter holds."""

    r: int
    alpha: float
    target_modules: list[str] | str | None
    modules_to_save: list[str] = field(default_factory=list)
    bias: str = "none"
    dropout: float = 0.0
    use_rslora: bool = False
    use_dora: bool = False
    fan_in_fan_out: bool = False
    rank_pattern: dict[str, int] = field(default_factory=dict)
    exclude_modules: list[str] | str | None = None
    lora_bias: bool = False

    @classmethod
    def from_adapter_config(cls, cfg: Mapping[str, Any]) -> LoraFacts:
        targets = cfg.get("target_modules")
        return cls(
            r=int(cfg.get("r") or 8),
            alpha=float(cfg.get("lora_alpha") or 8),
            target_modules=sorted(targets) if isinstance(targets, (list, set)) else targets,
            modules_to_save=list(cfg.get("modules_to_save") or []),
            bias=str(cfg.get("bias") or "none"),
            dropout=float(cfg.get("lora_dropout") or 0.0),
            use_rslora=bool(cfg.get("use_rslora")),
            use_dora=bool(cfg.get("use_dora")),
            fan_in_fan_out=bool(cfg.get("fan_in_fan_out")),
            rank_pattern=dict(cfg.get("rank_pattern") or {}),
            exclude_modules=cfg.get("exclude_modules"),
            lora_bias=bool(cfg.get("lora_bias")),
        )

    @classmethod
    def from_method(cls, method: Any) -> LoraFacts:
        """From a manifest's ``LoraMethod``."""
        return cls(
            r=method.r,
            alpha=float(method.alpha),
            target_modules=method.target_modules,
            modules_to_save=list(method.modules_to_save),
            bias=method.bias,
            dropout=float(method.dropout),
            use_rslora=method.use_rslora,
            use_dora=method.use_dora,
        )

    def rank_of(self, module: str) -> int:
        for pattern, r in self.rank_pattern.items():  # peft's get_pattern_key
            if re.match(rf"(.*\.)?({pattern})$", module):
                return int(r)
        return self.r


def _listed(name: str, entries: list[str] | str | None) -> bool:
    if not entries:
        return False
    if isinstance(entries, str) and entries.lower() == ALL_LINEAR:
        # peft: every Linear/Conv1D but the output embedding; from headers,
        # every 2-D weight (callers pass only those) but embeddings and heads
        return name.rpartition(".")[2] not in EMBEDDING_NAMES | OUTPUT_NAMES
    if isinstance(entries, str):
        return re.fullmatch(entries, name) is not None
    return name in entries or any(name.endswith(f".{e}") for e in entries)


def wraps(module: str, facts: LoraFacts) -> bool:
    """Whether peft would put LoRA on a module of this name."""
    if _listed(module, facts.exclude_modules):
        return False
    if any(re.match(rf"(^|.*\.){re.escape(m)}($|\..*)", module) for m in facts.modules_to_save):
        return False
    return _listed(module, facts.target_modules)


def module_weights(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    """Modules that own a 2-D ``weight`` (LoRA can wrap them), with its shape."""
    return {
        n.removesuffix(".weight"): s
        for n, (_, s) in shapes.items()
        if n.endswith(".weight") and len(s) == 2
    }


def all_modules(shapes: Shapes) -> set[str]:
    out: set[str] = set()
    for name in shapes:
        parts = name.split(".")[:-1]
        out.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return out


def is_transposed(base_config: Mapping[str, Any], facts: LoraFacts) -> bool:
    """Weights stored ``[in, out]`` (GPT-2's Conv1D): peft's ``fan_in_fan_out``."""
    return facts.fan_in_fan_out or base_config.get("model_type") in CONV1D_MODEL_TYPES


def finding(rule: str, message: str, severity: Severity = "error", **kw: Any) -> Finding:
    """A finding of kind ``adapter`` with rule ``adapter.<rule>`` (``loc=``: a manifest
    location, which also gives its ``field`` text)."""
    kw.update(kind="adapter", rule=f"adapter.{rule}", message=message, severity=severity)
    loc = kw.pop("loc", None)
    return Finding(**kw) if loc is None else Finding.at(loc, **kw)


def check_targets(shapes: Shapes, facts: LoraFacts, *, path: str | None = None) -> list[Finding]:
    """Every target and modules_to_save entry matches a module of the base."""
    out: list[Finding] = []
    modules = all_modules(shapes)
    weights = module_weights(shapes)
    targets = facts.target_modules
    all_linear = isinstance(targets, str) and targets.lower() == ALL_LINEAR
    entries = [targets] if isinstance(targets, str) and not all_linear else []
    entries += facts.target_modules if isinstance(facts.target_modules, list) else []
    for entry in entries:
        pattern = entry if isinstance(facts.target_modules, str) else [entry]
        hits = [m for m in modules if _listed(m, pattern)]
        if not hits:
            out.append(finding(
                "target-missing", f"target module {entry!r} matches no module of the base",
                path=path, loc=("method", "target_modules"), expected="a module of the base",
                observed=entry, hint="name a module the base has (peft: exact name, a "
                "'.'-suffix, or a regex over the whole name), e.g. "
                + ", ".join(sorted({m.rpartition('.')[2] for m in weights})[:6]),
            ))  # fmt: skip
        elif not any(m in weights for m in hits):
            out.append(finding(
                "target-not-wrappable", f"target module {entry!r} names no layer LoRA can wrap",
                path=path, loc=("method", "target_modules"), expected="a Linear/Conv1D/Embedding",
                observed=", ".join(sorted(hits)[:3]),
                hint="target the linear layers inside it, e.g. q_proj or c_attn",
            ))  # fmt: skip
    for entry in facts.modules_to_save:
        if not any(m == entry or m.endswith(entry) for m in modules):
            out.append(finding(
                "modules-to-save-missing", f"modules_to_save {entry!r} is not a module of the base",
                path=path, loc=("method", "modules_to_save"), expected="a module of the base",
                observed=entry, hint="name a module the base has, e.g. lm_head",
            ))  # fmt: skip
    return out


def expected_tensors(
    shapes: Shapes,
    facts: LoraFacts,
    *,
    transposed: bool,
    embeddings: frozenset[str] | None = None,
) -> dict[str, tuple[int, ...]]:
    """The tensors a peft LoRA adapter for this base holds, in the base's
    namespace (no ``base_model.model.`` prefix), with their shapes.

    ``embeddings``: modules that are embeddings (from the adapter's own keys);
    None guesses them by name (``wte``, ``embed_tokens``...).
    """
    out: dict[str, tuple[int, ...]] = {}
    weights = module_weights(shapes)
    for module, (d0, d1) in sorted(weights.items()):
        if not wraps(module, facts):
            continue
        r = facts.rank_of(module)
        leaf = module.rpartition(".")[2]
        is_emb = module in embeddings if embeddings is not None else leaf in EMBEDDING_NAMES
        if is_emb:
            out[f"{module}.lora_embedding_A"] = (r, d0)
            out[f"{module}.lora_embedding_B"] = (d1, r)
            out[f"{module}.base_layer.weight"] = (d0, d1)  # peft saves a targeted embedding
            continue
        fan_in, fan_out = (d0, d1) if transposed else (d1, d0)
        out[f"{module}.lora_A.weight"] = (r, fan_in)
        out[f"{module}.lora_B.weight"] = (fan_out, r)
        if facts.lora_bias:
            out[f"{module}.lora_B.bias"] = (fan_out,)
        if facts.use_dora:
            out[f"{module}.lora_magnitude_vector"] = (fan_out,)
        if facts.bias == "lora_only" and f"{module}.bias" in shapes:
            out[f"{module}.bias"] = shapes[f"{module}.bias"][1]
    if facts.bias == "all":
        out.update({n: s for n, (_, s) in shapes.items() if n.endswith(".bias")})
    saved = [m for m in all_modules(shapes) if any(m.endswith(e) for e in facts.modules_to_save)]
    for name, (_, shape) in shapes.items():
        if any(name.startswith(m + ".") for m in saved):
            out[name] = shape
    return out


def trainable_params(expected: Mapping[str, tuple[int, ...]]) -> int:
    """Parameters an adapter trains: the elements of its tensors, except a
    targeted embedding's frozen copy of the base layer."""
    total = 0
    for name, shape in expected.items():
        if name.endswith(".base_layer.weight"):
            continue
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def to_base_names(adapter_shapes: Shapes, base: Shapes) -> dict[str, str]:
    """Adapter tensor name -> the same tensor's name in the base's namespace."""
    modules = all_modules(base) | set(module_weights(base))
    out: dict[str, str] = {}
    for name in adapter_shapes:
        inner = name.removeprefix(PEFT_PREFIX)
        module, part = _split(inner)
        if module not in modules and module.partition(".")[2] in modules:
            module = module.partition(".")[2]
        out[name] = f"{module}.{part}" if module else part
    return out


def _split(name: str) -> tuple[str, str]:
    for part in _LORA_PARTS:
        if name.endswith("." + part):
            return name[: -len(part) - 1], part
    module, _, param = name.rpartition(".")
    return module, param


def check_adapter_tensors(
    adapter_shapes: Shapes,
    base: Shapes,
    facts: LoraFacts,
    *,
    transposed: bool,
    path: str | None = None,
) -> list[Finding]:
    """The adapter's tensors are exactly the expected set, each the shape
    that fits the base weight it wraps."""
    names = to_base_names(adapter_shapes, base)
    embeddings = frozenset(
        n.rpartition(".")[0] for n in names.values() if n.endswith(".lora_embedding_A")
    )
    expected = expected_tensors(base, facts, transposed=transposed, embeddings=embeddings)
    weights = module_weights(base)
    out: list[Finding] = []
    seen: set[str] = set()
    for name, based in sorted(names.items()):
        shape = adapter_shapes[name][1]
        seen.add(based)
        module = _split(based)[0]
        if based in expected:
            if tuple(shape) != expected[based]:
                out.append(finding(
                    "shape-mismatch", f"{name} does not fit the base weight it wraps",
                    path=path, field=name, expected=str(list(expected[based])),
                    observed=str(list(shape)),
                    hint=f"the base's {module}.weight is {list(weights.get(module, ()))}: "
                    "this adapter was trained on another architecture or size",
                ))  # fmt: skip
        elif "lora_" in _split(based)[1] and module not in weights:
            out.append(finding(
                "target-missing", f"{name} wraps {module!r}, which the base does not have",
                path=path, field=name, expected="a module of the base", observed=module,
                hint="the adapter belongs to another architecture; check-adapter it "
                "against its own base",
            ))  # fmt: skip
        else:
            out.append(finding(
                "unexpected-tensor", f"{name} is not a tensor this LoRA config saves",
                path=path, field=name, expected="only LoRA matrices and modules_to_save",
                observed=f"{adapter_shapes[name][0]}{list(shape)}",
                hint="remove it, or declare the module in modules_to_save and bind again",
            ))  # fmt: skip
    for based in sorted(set(expected) - seen):
        out.append(finding(
            "missing-tensor", f"the adapter lacks {based}",
            path=path, field=based, expected=str(list(expected[based])), observed="absent",
            hint="the adapter was saved from another config; re-save it from the trained model",
        ))  # fmt: skip
    return collapse(out)


def collapse(findings: list[Finding], keep: int = 3) -> list[Finding]:
    """At most ``keep`` rows per rule: past that, the first row stands for all,
    its message counting the others and ``extra["fields"]`` naming every one."""
    by_rule: dict[str, list[Finding]] = {}
    for f in findings:
        by_rule.setdefault(f.rule, []).append(f)
    out: list[Finding] = []
    for group in by_rule.values():
        if len(group) <= keep:
            out += group
            continue
        first = group[0]
        out.append(first._replace(
            message=f"{first.message} (and {len(group) - 1} more like it)",
            extra={**first.extra, "fields": [f.field for f in group]},
        ))  # fmt: skip
    return out


def with_tied_head(shapes: Shapes, config: Mapping[str, Any]) -> dict[str, Any]:
    """``shapes`` plus ``lm_head.weight`` when the checkpoint leaves it out
    because it is tied to the input embedding (GPT-2; transformers saves one)."""
    out: dict[str, Any] = dict(shapes)
    if "lm_head.weight" in out or config.get("tie_word_embeddings", True) is False:
        return out
    emb = [n for n in out if n.rpartition(".")[0].rpartition(".")[2] in ("wte", "embed_tokens")]
    if len(emb) == 1:
        out["lm_head.weight"] = out[emb[0]]
    return out


def method_findings(
    method: Any, shapes: Shapes, config: Mapping[str, Any], *, path: str | None = None
) -> list[Finding]:
    """A manifest's LoRA ``method`` against its base, from headers and config
    only: targets and modules_to_save exist, ``trainable_params`` (when given)
    is the count the shapes imply.  For ``verify``; other methods: nothing."""
    if method is None or getattr(method, "kind", None) != "lora":
        return []
    facts = LoraFacts.from_method(method)
    full = with_tied_head(shapes, config)
    out = check_targets(full, facts, path=path)
    if out or method.trainable_params is None or facts.target_modules is None:
        return out
    expected = expected_tensors(full, facts, transposed=is_transposed(config, facts))
    count = trainable_params(expected)
    if count != method.trainable_params:
        out.append(finding(
            "trainable-params", "method.trainable_params is not what the targets imply",
            path=path, loc=("method", "trainable_params"), expected=str(count),
            observed=str(method.trainable_params),
            hint=f"LoRA trains r*(in+out) per wrapped matrix plus modules_to_save: set {count}",
            extra={"wrapped": len({_split(n)[0] for n in expected if ".lora_" in n})},
        ))  # fmt: skip
    return out
