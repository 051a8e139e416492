"""Which modules a peft adapter wraps, and each one's rank and alpha: peft's rules, once.

Layer: pure core (stdlib only, and no ``typing``/``dataclasses`` at run time:
``lint`` imports it on the pre-commit path).  ``lint`` checks the patterns
compile, ``architecture`` resolves against a base read from its headers,
``check``/``bind`` compare an adapter's resolved set with the manifest's, and
the Trainer guard compares the modules a live model really wraps -- all with
``resolve`` below, so ``all-linear``, a regex and its explicit expansion agree.

peft 0.21's rules, as ``BaseTuner.inject_adapter`` applies them:

* ``layer_replication`` first rebuilds the layer list (``replicate_layers``:
  the list at ``model(.model)*[.bert].layers | encoder.layer | h``);
* ``all-linear`` (any case) becomes the full names of every ``nn.Linear`` /
  ``Conv1D`` but the output embedding (``_maybe_include_all_linear_layers``);
* every named module but the root is then judged by
  ``check_target_module_exists``: excluded when ``exclude_modules`` matches
  (a string: ``re.fullmatch``; a list: the name or a ``.``-suffix) or a
  ``modules_to_save`` entry ``m`` matches ``(^|.*\\.)m($|\\..*)`` (unescaped);
  else a string target is ``re.fullmatch``-ed, a list matches the name or a
  ``.``-suffix, and ``layers_to_transform``/``layers_pattern`` narrow a
  suffix match to the layer indexes named;
* a matched module LoRA cannot wrap makes peft raise (``unsupported`` here);
* rank and alpha: the first ``rank_pattern``/``alpha_pattern`` key ``k`` (in
  order) with ``re.match(r"(.*\\.)?(k)$", name)`` (``get_pattern_key``), else
  ``r``/``lora_alpha``; scaling ``alpha / r`` (rsLoRA: ``alpha / sqrt(r)``);
* ``fan_in_fan_out`` is set by peft itself as it wraps: ``False`` at each
  ``nn.Linear``, ``True`` at each ``Conv1D`` (``dispatch_default``);
* ``modules_to_save`` wraps every module whose name ends with an entry
  (``_set_trainable``; no dot needed).

A module tree is the base's ``named_modules()`` in order, each with its kind
(``linear``, ``conv1d``, ``embedding``, ``conv`` for torch's Conv1d/2d/3d and
MultiheadAttention, ``other``), and the output embedding's name.
"""

from __future__ import annotations

import math
import re
from collections import namedtuple

TYPE_CHECKING = False  # no runtime `typing` on the pre-commit path (see findings.py)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    from ftmanifest.location import Loc

ALL_LINEAR = "all-linear"  # peft's INCLUDE_LINEAR_LAYERS_SHORTHAND
LINEAR, CONV1D, EMBEDDING, CONV, OTHER = "linear", "conv1d", "embedding", "conv", "other"
LORA_KINDS = frozenset({LINEAR, CONV1D, EMBEDDING, CONV})  # what lora's dispatch_default wraps

Tree = namedtuple("Tree", ["modules", "output"])
Tree.__doc__ = """A base's modules: ``modules`` ((name, kind), ...) in named_modules order,
``output`` the output embedding's name or None."""

Spec = namedtuple(
    "Spec",
    ["target_modules", "exclude_modules", "modules_to_save", "layers_to_transform",
     "layers_pattern", "r", "alpha", "rank_pattern", "alpha_pattern", "use_rslora",
     "fan_in_fan_out", "layer_replication"],
    defaults=(None, None, (), None, None, 8, 8.0, {}, {}, False, False, None),
)  # fmt: skip
Spec.__doc__ = """What decides where an adapter goes and its rank/alpha, by peft's names
(``alpha`` is ``lora_alpha``)."""

Resolved = namedtuple(
    "Resolved",
    ["wrapped", "kinds", "unsupported", "excluded", "saved", "r", "alpha", "scaling",
     "fan_in_fan_out", "errors"],
)  # fmt: skip
Resolved.__doc__ = """What peft would do with a spec on a tree: ``wrapped`` names in tree
order (``kinds`` theirs), ``unsupported`` ((name, kind), ...) matched but not
wrappable (peft raises), ``excluded`` names ``exclude_modules`` took out,
``saved`` the modules_to_save wrapped, ``r``/``alpha``/``scaling`` per wrapped
module, ``fan_in_fan_out`` the config value peft ends with, ``errors``
((field loc, pattern, message), ...) for patterns that do not compile (then
nothing is resolved)."""


def tree(modules: Iterable[tuple[str, str]], output: str | None = None) -> Tree:
    return Tree(tuple((str(n), str(k)) for n, k in modules if n), output)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        value = obj.get(name, default)
    else:
        value = getattr(obj, name, default)
    return default if value is None else value


def _names(value: Any) -> Any:
    """A list/set/tuple of names as a sorted tuple; a string or None as is."""
    if value is None or isinstance(value, str):
        return value
    return tuple(sorted({str(v) for v in value}))


def _ranges(value: Any) -> tuple[tuple[int, int], ...] | None:
    if not value:
        return None  # peft: `if peft_config.layer_replication:`
    return tuple((int(a), int(b)) for a, b in value)


def spec_from_config(config: Mapping[str, Any]) -> Spec:
    """From a peft ``LoraConfig`` as a dict (``adapter_config.json``, ``to_dict()``)."""
    return Spec(
        target_modules=_names(config.get("target_modules")),
        exclude_modules=_names(config.get("exclude_modules")),
        modules_to_save=_names(config.get("modules_to_save")) or (),
        layers_to_transform=config.get("layers_to_transform"),
        layers_pattern=config.get("layers_pattern"),
        r=int(_get(config, "r", 8)),
        alpha=float(_get(config, "lora_alpha", 8)),
        rank_pattern=dict(config.get("rank_pattern") or {}),
        alpha_pattern=dict(config.get("alpha_pattern") or {}),
        use_rslora=bool(config.get("use_rslora")),
        fan_in_fan_out=bool(config.get("fan_in_fan_out")),
        layer_replication=_ranges(config.get("layer_replication")),
    )


def spec_from_method(method: Any) -> Spec:
    """From a manifest's LoRA ``method`` (the model, or its plain data)."""
    return Spec(
        target_modules=_names(_get(method, "target_modules")),
        exclude_modules=_names(_get(method, "exclude_modules")),
        modules_to_save=_names(_get(method, "modules_to_save", ())) or (),
        r=int(_get(method, "r", 8)),
        alpha=float(_get(method, "alpha", 8)),
        rank_pattern=dict(_get(method, "rank_pattern", {})),
        alpha_pattern=dict(_get(method, "alpha_pattern", {})),
        use_rslora=bool(_get(method, "use_rslora", False)),
        fan_in_fan_out=bool(_get(method, "fan_in_fan_out", False)),
        layer_replication=_ranges(_get(method, "layer_replication")),
    )


# --- the patterns, as peft compiles them -------------------------------------


def _saved_form(entry: str) -> str:
    return rf"(^|.*\.){entry}($|\..*)"


def _pattern_key_form(key: str) -> str:
    return rf"(.*\.)?({key})$"


def _layers_form(pattern: str) -> str:
    return rf"(?:^|.*?\.){pattern}\.(?P<idx>\d+)\."


def is_all_linear(targets: Any) -> bool:
    return isinstance(targets, str) and targets.lower() == ALL_LINEAR


def pattern_errors(method: Any) -> list[tuple[Loc, str, str]]:
    """((field loc, pattern, why), ...) for every pattern peft would fail to
    compile, in a manifest method (model or data) or a peft config dict."""
    out: list[tuple[Loc, str, str]] = []

    def check(loc: Loc, pattern: str, form: str) -> None:
        try:
            re.compile(form)
        except re.error as exc:
            out.append((loc, pattern, str(exc)))
        except (RecursionError, OverflowError, ValueError) as exc:
            out.append((loc, pattern, type(exc).__name__))

    for name in ("target_modules", "exclude_modules"):
        value = _get(method, name)
        if isinstance(value, str) and not (name == "target_modules" and is_all_linear(value)):
            check((name,), value, value)
    for entry in _get(method, "modules_to_save", ()) or ():
        check(("modules_to_save",), str(entry), _saved_form(str(entry)))
    for name in ("rank_pattern", "alpha_pattern"):
        for key in _get(method, name, {}) or {}:
            check((name, str(key)), str(key), _pattern_key_form(str(key)))
    layers = _get(method, "layers_pattern")
    for p in [layers] if isinstance(layers, str) else layers or ():
        check(("layers_pattern",), str(p), _layers_form(str(p)))
    return out


# --- matching ------------------------------------------------------------------


def _dot_suffixes(key: str) -> list[str]:
    """Every ``s`` with ``key.endswith("." + s)``: one set lookup each, instead of
    one ``endswith`` per entry (an expanded all-linear list has hundreds)."""
    return [key[i + 1 :] for i, c in enumerate(key) if c == "."]


def _listed(key: str, entries: Sequence[str] | str) -> bool:
    if isinstance(entries, str):
        return re.fullmatch(entries, key) is not None
    names = entries if isinstance(entries, (set, frozenset)) else frozenset(entries)
    return key in names or any(s in names for s in _dot_suffixes(key))


def _layer_ok(spec: Spec, key: str) -> bool:
    """peft's layers_to_transform / layers_pattern narrowing of a suffix match."""
    indexes = spec.layers_to_transform
    if indexes is None or (isinstance(indexes, list) and not indexes):
        return True
    pattern = spec.layers_pattern
    match = None
    if not pattern:
        match = re.match(r".*?\.[^.]*\.(?P<idx>\d+)\.", key)
    else:
        for p in [pattern] if isinstance(pattern, str) else pattern:
            match = re.match(_layers_form(p), key)
            if match is not None:
                break
    if match is None:
        return False
    index = int(match.group("idx"))
    return index == indexes if isinstance(indexes, int) else index in indexes


def excluded(spec: Spec, key: str) -> str | None:
    """Why peft never wraps ``key``: 'exclude_modules', 'modules_to_save', or None."""
    ex = spec.exclude_modules
    if ex and _listed(key, ex):
        return "exclude_modules"
    if any(re.match(_saved_form(m), key) for m in spec.modules_to_save):
        return "modules_to_save"
    return None


def matches(spec: Spec, key: str, targets: Any = None) -> bool:
    """peft's ``check_target_module_exists`` (exclusions first); ``targets``: an
    expanded target list to use instead of ``spec.target_modules``."""
    if excluded(spec, key):
        return False
    targets = spec.target_modules if targets is None else targets
    if not targets:
        return False
    if isinstance(targets, str):
        return re.fullmatch(targets, key) is not None
    names = targets if isinstance(targets, (set, frozenset)) else frozenset(targets)
    if key in names:
        return True
    return any(s in names for s in _dot_suffixes(key)) and _layer_ok(spec, key)


def all_linear(t: Tree) -> tuple[str, ...]:
    """The full names ``all-linear`` expands to on this tree."""
    return tuple(n for n, k in t.modules if k in (LINEAR, CONV1D) and n != t.output)


def pattern_key(keys: Iterable[str], name: str) -> str:
    """peft's ``get_pattern_key``: the first key matching ``name``, else ``name``."""
    for key in keys:
        if re.match(_pattern_key_form(key), name):
            return key
    return name


def saved_modules(t: Tree, entries: Iterable[str]) -> tuple[str, ...]:
    """The modules ``modules_to_save`` wraps (outermost only), in tree order."""
    entries = tuple(entries)
    out: list[str] = []
    for name, _ in t.modules:
        if any(name.startswith(s + ".") for s in out):
            continue
        if any(name.endswith(e) for e in entries):
            out.append(name)
    return tuple(out)


def resolve(spec: Spec, t: Tree, *, replicated: bool = False) -> Resolved:
    """What peft makes of ``spec`` on ``t``: the base as saved, replicated here
    when the spec asks for ``layer_replication``; ``replicated``: ``t`` is a live
    model's tree, already replicated."""
    errors = tuple(pattern_errors(spec._asdict()))
    if not errors and spec.layer_replication and not replicated:
        grown = replicate(t, spec.layer_replication)
        if grown is None:
            errors = ((("layer_replication",), str([list(p) for p in spec.layer_replication]),
                       "peft finds no layer list to replicate (or a range past its end) in "
                       "this model"),)  # fmt: skip
        else:
            t = grown
    if errors:
        return Resolved((), {}, (), (), (), {}, {}, {}, spec.fan_in_fan_out, errors)
    targets: Any = frozenset(all_linear(t)) if is_all_linear(spec.target_modules) else None
    if targets is None and spec.target_modules and not isinstance(spec.target_modules, str):
        targets = frozenset(spec.target_modules)
    wrapped: list[str] = []
    kinds: dict[str, str] = {}
    unsupported: list[tuple[str, str]] = []
    out_excluded: list[str] = []
    for name, kind in t.modules:
        if excluded(spec, name) == "exclude_modules":
            out_excluded.append(name)
            continue
        if not matches(spec, name, targets):
            continue
        if kind in LORA_KINDS:
            wrapped.append(name)
            kinds[name] = kind
        else:
            unsupported.append((name, kind))
    r = {n: int(spec.rank_pattern.get(pattern_key(spec.rank_pattern, n), spec.r)) for n in wrapped}
    alpha = {
        n: float(spec.alpha_pattern.get(pattern_key(spec.alpha_pattern, n), spec.alpha))
        for n in wrapped
    }
    scaling = {n: alpha[n] / (math.sqrt(r[n]) if spec.use_rslora else r[n]) for n in wrapped}
    fan = bool(spec.fan_in_fan_out)
    for n in wrapped:
        fan = {LINEAR: False, CONV1D: True}.get(kinds[n], fan)
    saved = saved_modules(t, spec.modules_to_save)
    return Resolved(tuple(wrapped), kinds, tuple(unsupported), tuple(out_excluded), saved,
                    r, alpha, scaling, fan, ())  # fmt: skip


# --- layer_replication ----------------------------------------------------------


def layers_container(names: Iterable[str]) -> str | None:
    """Where ``replicate_layers`` finds the layer list in a tree of these names."""
    have = set(names)
    prefix = ""
    while f"{prefix}model" in have:
        prefix += "model."
    if f"{prefix}bert" in have:
        prefix += "bert."
    for candidate in ("layers", "encoder.layer", "h"):
        if f"{prefix}{candidate}" in have:
            return f"{prefix}{candidate}"
    return None


def replicated_names(
    names: Sequence[str], layer_map: Iterable[tuple[int, int]]
) -> list[tuple[str, str]] | None:
    """(new name, name it is a copy of) for every name once the layers are
    replicated as ``layer_map`` says; None when peft finds no layer list (it
    raises) or a range names a layer the base lacks."""
    container = layers_container(_prefixes(names))
    if container is None:
        return None
    head = container + "."
    index_of: dict[str, list[str]] = {}
    for n in names:
        if n.startswith(head):
            index_of.setdefault(n[len(head) :].partition(".")[0], []).append(n)
    order = [(f"{head}{j}", f"{head}{i}") for j, i in enumerate(_indexes(layer_map))]
    if any(str(i) not in index_of for i in _indexes(layer_map)):
        return None
    out: list[tuple[str, str]] = []
    done = False
    for n in names:
        if not n.startswith(head):
            out.append((n, n))
            continue
        if done:
            continue
        done = True  # every layer is laid out in the new order, where the first one stood
        for new, old in order:
            src = old.rpartition(".")[2]
            out += [(new + m[len(old) :], m) for m in index_of[src]]
    return out


def _indexes(layer_map: Iterable[tuple[int, int]]) -> list[int]:
    return [i for start, end in layer_map for i in range(int(start), int(end))]


def _prefixes(names: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for n in names:
        parts = n.split(".")
        out.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return out


def replicate(t: Tree, layer_map: Iterable[tuple[int, int]] | None) -> Tree | None:
    """The tree after peft's ``replicate_layers``; ``t`` when there is nothing to
    replicate, None when peft would refuse the model."""
    if not layer_map:
        return t
    kinds = dict(t.modules)
    names = [n for n, _ in t.modules if n]
    pairs = replicated_names(names, layer_map)
    if pairs is None:
        return None
    return Tree(tuple((new, kinds[old]) for new, old in pairs), t.output)
