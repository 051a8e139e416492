"""Which modules a LoRA adapter wraps, and which tensors it must hold, from headers.

Layer: judging rooms - pure core (takes tensor shapes and configs, returns findings).
Used by ``check-adapter`` on a saved adapter and, without one, to judge a manifest's
``method`` against its pinned base (target modules exist, trainable count).

Which modules are wrapped, with which rank, is peft's rule as ``targets``
resolves it, on the base's module tree as ``headers`` reads it.  Shapes: a
Linear weight is ``[out, in]``, a GPT-2 ``Conv1D`` weight ``[in, out]``
(peft's ``fan_in_fan_out``), an Embedding ``[num, dim]``; LoRA adds
``lora_A [r, in]`` and ``lora_B [out, r]`` (embeddings: ``lora_embedding_A
[r, num]``, ``lora_embedding_B [dim, r]``), DoRA a ``lora_magnitude_vector
[out]``.  The adapter's keys are peft's (``base_model.model.<module>...``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ftmanifest.adapter.headers import (
    CONV1D_MODEL_TYPES,
    Shapes,
    header_tree,
    module_weights,
    replicate_shapes,
    split_part,
    to_base_names,
)
from ftmanifest.adapter.headers import with_tied_head as with_tied_head  # preflight's
from ftmanifest.findings import Finding
from ftmanifest.location import format_loc
from ftmanifest.manifest import targets as tg

if TYPE_CHECKING:
    from ftmanifest.findings import Severity

ALL_LINEAR = tg.ALL_LINEAR


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
    alpha_pattern: dict[str, float] = field(default_factory=dict)
    layer_replication: list[list[int]] | None = None
    layers_to_transform: list[int] | int | None = None
    layers_pattern: list[str] | str | None = None

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
            alpha_pattern=dict(cfg.get("alpha_pattern") or {}),
            layer_replication=cfg.get("layer_replication") or None,
            layers_to_transform=cfg.get("layers_to_transform"),
            layers_pattern=cfg.get("layers_pattern"),
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
            fan_in_fan_out=method.fan_in_fan_out,
            rank_pattern=dict(method.rank_pattern),
            exclude_modules=method.exclude_modules,
            alpha_pattern=dict(method.alpha_pattern),
            layer_replication=method.layer_replication,
        )

    def spec(self) -> tg.Spec:
        """The facts ``targets.resolve`` reads."""
        t, ex = self.target_modules, self.exclude_modules
        return tg.Spec(
            target_modules=t if t is None or isinstance(t, str) else tuple(sorted(set(t))),
            exclude_modules=ex if ex is None or isinstance(ex, str) else tuple(sorted(set(ex))),
            modules_to_save=tuple(sorted(set(self.modules_to_save))),
            layers_to_transform=self.layers_to_transform,
            layers_pattern=self.layers_pattern,
            r=self.r,
            alpha=self.alpha,
            rank_pattern=dict(self.rank_pattern),
            alpha_pattern=dict(self.alpha_pattern),
            use_rslora=self.use_rslora,
            fan_in_fan_out=self.fan_in_fan_out,
            layer_replication=tg._ranges(self.layer_replication),
        )

    def rank_of(self, module: str) -> int:
        """peft's rank for ``module`` (``rank_pattern`` first, else ``r``)."""
        key = tg.pattern_key(self.rank_pattern, module)
        return int(self.rank_pattern.get(key, self.r))


def wraps(module: str, facts: LoraFacts, tree: tg.Tree | None = None) -> bool:
    """Whether peft would put LoRA on a module of this name (``all-linear``
    needs the ``tree`` it expands on)."""
    spec = facts.spec()
    if tg.is_all_linear(spec.target_modules):
        if tree is None:
            raise ValueError("all-linear resolves on a module tree: pass tree=")
        return module in tg.resolve(spec, tree).wrapped
    return tg.matches(spec, module)


def is_transposed(base_config: Mapping[str, Any], facts: LoraFacts) -> bool:
    """Weights stored ``[in, out]`` (GPT-2's Conv1D): peft's ``fan_in_fan_out``."""
    return facts.fan_in_fan_out or base_config.get("model_type") in CONV1D_MODEL_TYPES


def finding(rule: str, message: str, severity: Severity = "error", **kw: Any) -> Finding:
    """A finding of kind ``adapter`` with rule ``adapter.<rule>`` (``loc=``: a manifest
    location, which also gives its ``field`` text)."""
    kw.update(kind="adapter", rule=f"adapter.{rule}", message=message, severity=severity)
    loc = kw.pop("loc", None)
    return Finding(**kw) if loc is None else Finding.at(loc, **kw)


def pattern_findings(errors: Any, *, path: str | None, where: str = "method") -> list[Finding]:
    """A row for every pattern peft could not compile (``targets.pattern_errors``)."""
    return [finding(
        "pattern-invalid", f"{format_loc((where, *loc))} '{pattern}' is not a regular "
        f"expression peft can use ({why})", path=path, loc=(where, *loc),
        expected="a Python regular expression", observed=pattern,
        hint="fix the pattern (peft compiles it with Python's re), or list the module names",
    ) for loc, pattern, why in errors]  # fmt: skip


def _replication_finding(spec: tg.Spec, path: str | None) -> Finding:
    return finding(
        "layer-replication-impossible", "peft cannot replicate this base's layers as "
        "layer_replication asks", path=path, loc=("method", "layer_replication"),
        expected="ranges within a layer list at model(.model)*.layers, encoder.layer or h",
        observed=str([list(p) for p in spec.layer_replication or ()]),
        hint="name [start, end) ranges of the base's layers, or drop layer_replication",
    )  # fmt: skip


def check_targets(
    shapes: Shapes,
    facts: LoraFacts,
    *,
    path: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """Every target and modules_to_save entry matches a module of the base,
    every matched module is one LoRA can wrap, every pattern compiles."""
    spec = facts.spec()
    errors = tg.pattern_errors(spec._asdict())
    if errors:
        return pattern_findings(errors, path=path)
    tree = header_tree(shapes, config)
    grown = tg.replicate(tree, spec.layer_replication)
    if grown is None:
        return [_replication_finding(spec, path)]
    res = tg.resolve(spec, grown, replicated=True)
    names = [n for n, _ in grown.modules]
    unsupported = dict(res.unsupported)
    weights = module_weights(shapes)
    out: list[Finding] = []
    loc = ("method", "target_modules")
    some = ", ".join(sorted({m.rpartition(".")[2] for m in weights})[:6])
    targets = spec.target_modules
    if isinstance(targets, str):
        entries: list[tuple[str, list[str]]] = [(targets, [*res.wrapped, *unsupported])]
    else:
        entries = [(e, [m for m in names if m == e or m.endswith(f".{e}")])
                   for e in dict.fromkeys(facts.target_modules or ())]  # fmt: skip
    for entry, hits in entries:
        bad = [m for m in hits if m in unsupported]
        if not hits:
            out.append(finding(
                "target-missing", f"target module {entry!r} matches no module of the base",
                path=path, loc=loc, expected="a module of the base", observed=entry,
                hint="name a module the base has (peft: exact name, a '.'-suffix, a regex "
                f"over the whole name, or all-linear), e.g. {some}",
            ))  # fmt: skip
        elif bad:
            out.append(finding(
                "target-not-wrappable", f"target module {entry!r} names a module LoRA cannot "
                "wrap (peft refuses it)", path=path, loc=loc,
                expected="Linear/Conv1D/Embedding/Conv layers only",
                observed=", ".join(f"{m} ({unsupported[m]})" for m in bad[:3]),
                hint="target the linear layers inside it, e.g. q_proj or c_attn",
            ))  # fmt: skip
    for entry in facts.modules_to_save:
        if not any(m.endswith(entry) for m in names):
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
    replicated: bool = False,
) -> dict[str, tuple[int, ...]]:
    """The tensors a peft LoRA adapter for this base holds, in the base's
    namespace (no ``base_model.model.`` prefix), with their shapes.

    ``embeddings``: modules that are embeddings (from the adapter's own keys),
    besides those named like one (``wte``, ``embed_tokens``...).
    ``layer_replication``: the layers as replicated (a base that cannot be
    replicated expects nothing; ``check_targets`` says why).
    """
    out: dict[str, tuple[int, ...]] = {}
    spec = facts.spec()
    grown = replicate_shapes(shapes, spec.layer_replication)
    if grown is None or tg.pattern_errors(spec._asdict()):
        return out
    shapes = grown
    tree = header_tree(shapes, None, embeddings)
    res = tg.resolve(spec, tree, replicated=True)
    weights = module_weights(shapes)
    for module in res.wrapped:
        if module not in weights:
            continue  # a convolution: peft's LoRA tensors for it are not modelled here
        d0, d1 = weights[module]
        r = res.r[module]
        if res.kinds[module] == tg.EMBEDDING:
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
    saved = res.saved
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


def check_adapter_tensors(
    adapter_shapes: Shapes,
    base: Shapes,
    facts: LoraFacts,
    *,
    transposed: bool,
    path: str | None = None,
) -> list[Finding]:
    """The adapter's tensors are exactly the expected set, each the shape
    that fits the base weight it wraps (the base's layers replicated first
    when ``layer_replication`` asks: ``check_targets`` refuses a base that
    cannot be)."""
    grown = replicate_shapes(base, facts.layer_replication)
    if grown is None:
        return []
    base = grown
    names = to_base_names(adapter_shapes, base)
    embeddings = frozenset(
        n.rpartition(".")[0] for n in names.values() if n.endswith(".lora_embedding_A")
    )
    expected = expected_tensors(
        base, facts, transposed=transposed, embeddings=embeddings, replicated=True
    )
    weights = module_weights(base)
    out: list[Finding] = []
    seen: set[str] = set()
    for name, based in sorted(names.items()):
        shape = adapter_shapes[name][1]
        seen.add(based)
        module = split_part(based)[0]
        if based in expected:
            if tuple(shape) != expected[based]:
                out.append(finding(
                    "shape-mismatch", f"{name} does not fit the base weight it wraps",
                    path=path, field=name, expected=str(list(expected[based])),
                    observed=str(list(shape)),
                    hint=f"the base's {module}.weight is {list(weights.get(module, ()))}: "
                    "this adapter was trained on another architecture or size",
                ))  # fmt: skip
        elif "lora_" in split_part(based)[1] and module not in weights:
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
    out = check_targets(full, facts, path=path, config=config)
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
            extra={"wrapped": len({split_part(n)[0] for n in expected if ".lora_" in n})},
        ))  # fmt: skip
    return out
