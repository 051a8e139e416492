"""A peft config against a manifest's ``method``: every difference, as data.

Layer: judging rooms - pure core (below ``check``, ``bind`` and the Trainer guard, which
turn each ``Difference`` into their own rows: ``adapter.method-differs`` for a saved
adapter, ``drift.method`` for a live model).  The config is peft's, as
``adapter_config.json`` holds it or ``PeftConfig.to_dict()`` gives it.

LoRA (``method.kind: lora``) is compared *resolved* (``targets.resolve`` on
the same module tree, for the manifest and for the config): the set of
wrapped modules, each one's rank, alpha and scaling, the modules
``exclude_modules`` and ``modules_to_save`` take, and the ``fan_in_fan_out``
peft ends with; and as stated: r, alpha, dropout, bias, rsLoRA, DoRA,
``init_lora_weights``, ``layer_replication``.  Any other setting of the
config that is not peft's default and not harmless at load (``lora_bias``,
``layers_to_transform``, ``target_parameters``, ``alora_invocation_tokens``...;
the table is ``lora_fields``) changes what the adapter computes and the
manifest cannot state it: a difference too.

Other methods (``method.kind: peft``) are compared by ``peft_type`` and by
every key of ``method.config``; a LoRA config under ``kind: peft`` must also
state there every field it sets away from peft's default (the same table);
the config as a whole is bound by
``config_digest``.  A config of one method under a manifest of another is
one difference, a plain sentence naming both (``kind_sentence``).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ftmanifest.adapter import lora_fields
from ftmanifest.manifest import targets as tg
from ftmanifest.manifest.canonical import canonical_json

CONFIG_DIGEST_KIND = "sha256-peft-config"
# Not in the digest: bind itself rewrites these two, peft the others on every save.
UNDIGESTED = frozenset({"base_model_name_or_path", "revision", "peft_version", "inference_mode"})
# Compared with the manifest's LoRA method field by field (``lora_fields``' table).
LORA_STATED = lora_fields.COMPARED - {"peft_type"}
# peft keeps these as sets; their order in a saved list means nothing.
SET_KEYS = frozenset({"target_modules", "exclude_modules", "modules_to_save",
                      "feedforward_modules"})  # fmt: skip
SHOWN = 3


@dataclass(frozen=True)
class Difference:
    """One field where the config is not the manifest's method."""

    loc: tuple[str, ...]  # within ``method``: ("r",), ("config", "target_modules")...
    message: str
    expected: str
    observed: str
    hint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def declared(method: Any) -> str:
    """What the manifest's method declares, in words naming the field."""
    kind = getattr(method, "kind", None)
    if kind == "lora":
        return "LoRA (method.kind: lora)"
    if kind == "full":
        return "full fine-tuning (method.kind: full)"
    if kind == "peft":
        return f"{method.peft_type} (method.kind: peft)"
    return "no method (no method section)"


def peft_type_of(config: Mapping[str, Any]) -> str:
    return str(plain(config.get("peft_type")) or "unknown").upper()


def kind_sentence(subject: str, peft_type: str, method: Any) -> str:
    """``check-adapter binds LoRA adapters and declared PEFT methods; this adapter
    is IA3 and the manifest declares LoRA (method.kind: lora)``."""
    return (
        f"check-adapter binds LoRA adapters and declared PEFT methods; {subject} is "
        f"{peft_type} and the manifest declares {declared(method)}"
    )


def kind_fits(peft_type: str, method: Any) -> bool:
    kind = getattr(method, "kind", None)
    if kind == "lora":
        return peft_type == "LORA"
    if kind == "peft":
        return peft_type == str(method.peft_type).upper()
    return False


def plain(value: Any) -> Any:
    """JSON-able and order-free where peft's is: enums by value, sets sorted,
    tuples as lists, integral floats as ints."""
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v) if str(k) not in SET_KEYS else _setlike(v)
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return plain(dataclasses.asdict(value))
    return repr(value)


def _setlike(value: Any) -> Any:
    value = plain(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return sorted(set(value))
    return value


def canonical_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config as bound: ``plain``, without what saving rewrites."""
    return {k: v for k, v in plain(dict(config)).items() if k not in UNDIGESTED}


def config_digest(config: Mapping[str, Any]) -> str:
    """``sha256-peft-config:<hex>`` over the canonical JSON of ``canonical_config``."""
    raw = canonical_json(canonical_config(config))
    return f"{CONFIG_DIGEST_KIND}:{hashlib.sha256(raw).hexdigest()}"


def show(value: Any) -> str:
    """``8`` for 8.0, so a YAML ``alpha: 8`` and peft's ``lora_alpha: 8`` read alike."""
    value = plain(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _names(items: Any) -> str:
    items = sorted(items)
    more = f" (and {len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more if items else "none"


def _same(a: Any, b: Any) -> bool:
    a, b = plain(a), plain(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b and type(a) is type(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return bool(a == b)


def _cfg(config: Mapping[str, Any], key: str, default: Any) -> Any:
    value = config.get(key)
    return default if value is None else value


def unstated(config: Mapping[str, Any], stated: frozenset[str] = LORA_STATED) -> list[str]:
    """Keys of ``config`` set away from peft's default that are not harmless at
    load (``lora_fields.FIELDS``) and that the manifest's method has no field for."""
    return lora_fields.unstated(config, stated)


def _diff_map(
    want: Mapping[str, float], got: Mapping[str, float], names: Any
) -> dict[str, tuple[float, float]]:
    return {n: (want[n], got[n]) for n in names if not _same(want[n], got[n])}


def _map_text(diffs: Mapping[str, tuple[float, float]], side: int) -> str:
    rows = [f"{n}={show(v[side])}" for n, v in sorted(diffs.items())]
    more = f" (and {len(rows) - SHOWN} more)" if len(rows) > SHOWN else ""
    return ", ".join(rows[:SHOWN]) + more


def lora_differences(
    method: Any,
    config: Mapping[str, Any],
    expected: tg.Resolved,
    observed: tg.Resolved,
    *,
    who: str = "the adapter",
    observed_dropout: Mapping[str, float] | None = None,
) -> list[Difference]:
    """Every difference between a LoRA ``config`` and the manifest's LoRA method.

    ``expected``/``observed``: the manifest's spec and the config's (or the
    modules a live model really wraps), resolved on one tree;
    ``observed_dropout``: each live module's dropout, when there is a model."""
    out: list[Difference] = []

    def row(name: Any, want: Any, got: Any, what: str | None = None, **extra: Any) -> None:
        loc = tuple(name) if isinstance(name, tuple) else (name,)
        out.append(Difference(loc, what or f"{who}'s {loc[0]} is not the manifest's",
                              show(want), show(got), extra=dict(extra)))  # fmt: skip

    for res, side in ((expected, "the manifest's"), (observed, f"{who}'s")):
        for loc, pattern, why in res.errors:
            row(
                tuple(str(p) for p in loc),
                "a pattern peft can use",
                pattern,
                f"{side} {loc[0]} cannot be resolved: {why}",
            )
    if expected.errors or observed.errors:
        return out
    if expected.unsupported:
        names = [n for n, _ in expected.unsupported]
        row(
            "target_modules",
            "modules LoRA can wrap",
            _names(names),
            "the manifest's target_modules match modules LoRA cannot wrap (peft refuses them)",
        )
    want_set, got_set = set(expected.wrapped), set(observed.wrapped)
    if want_set != got_set:
        missing, extra_ = sorted(want_set - got_set), sorted(got_set - want_set)
        row("target_modules", f"the {len(want_set)} modules method.target_modules resolves to",
            f"missing: {_names(missing)}; extra: {_names(extra_)}",
            f"{who} wraps other modules than the manifest's target_modules resolve to",
            missing=missing, extra=extra_)  # fmt: skip
    common = sorted(want_set & got_set)
    for name, key, pattern, per in (("r", "r", "rank_pattern", "r"),
                                    ("alpha", "lora_alpha", "alpha_pattern", "alpha")):  # fmt: skip
        stated = _same(getattr(method, name), _cfg(config, key, 8))
        if not stated:
            row(name, getattr(method, name), _cfg(config, key, 8))
        diffs = _diff_map(getattr(expected, per), getattr(observed, per), common)
        patterned = bool(getattr(method, pattern)) or bool(config.get(pattern))
        if diffs and (stated or patterned):
            row(
                pattern,
                _map_text(diffs, 0),
                _map_text(diffs, 1),
                f"modules of {who} have another {name} than method.{name} and "
                f"method.{pattern} give them",
                modules=sorted(diffs),
            )
    if not _same(method.use_rslora, _cfg(config, "use_rslora", False)):
        row("use_rslora", method.use_rslora, _cfg(config, "use_rslora", False))
    else:
        same_ra = [n for n in common
                   if _same(expected.r[n], observed.r[n])
                   and _same(expected.alpha[n], observed.alpha[n])]  # fmt: skip
        diffs = _diff_map(expected.scaling, observed.scaling, same_ra)
        if diffs:
            row("alpha", _map_text(diffs, 0), _map_text(diffs, 1),
                f"modules of {who} scale LoRA otherwise than alpha/r (rsLoRA: alpha/sqrt(r))",
                modules=sorted(diffs))  # fmt: skip
    if not _same(method.dropout, _cfg(config, "lora_dropout", 0.0)):
        row("dropout", method.dropout, _cfg(config, "lora_dropout", 0.0))
    elif observed_dropout:
        diffs = {n: (method.dropout, p) for n, p in observed_dropout.items()
                 if not _same(p, method.dropout)}  # fmt: skip
        if diffs:
            row(
                "dropout",
                method.dropout,
                _map_text(diffs, 1),
                f"modules of {who} drop out otherwise than method.dropout",
                modules=sorted(diffs),
            )
    for name, key, default in (("bias", "bias", "none"), ("use_dora", "use_dora", False),
                               ("init", "init_lora_weights", True)):  # fmt: skip
        if not _same(getattr(method, name), _cfg(config, key, default)):
            row(name, getattr(method, name), _cfg(config, key, default))
    want_rep = [list(p) for p in tg._ranges(method.layer_replication) or ()] or None
    got_rep = [list(p) for p in tg._ranges(config.get("layer_replication")) or ()] or None
    if want_rep != got_rep:
        row("layer_replication", want_rep, got_rep)
    if expected.fan_in_fan_out != observed.fan_in_fan_out:
        row("fan_in_fan_out", expected.fan_in_fan_out, observed.fan_in_fan_out)
    sets = (("modules_to_save", expected.saved, observed.saved),
            ("exclude_modules", expected.excluded, observed.excluded))  # fmt: skip
    for name, want_m, got_m in sets:
        if set(want_m) != set(got_m):
            row(
                name,
                _names(want_m),
                _names(got_m),
                f"{who}'s {name} take other modules than the manifest's",
                missing=sorted(set(want_m) - set(got_m)),
                extra=sorted(set(got_m) - set(want_m)),
            )
    for key in unstated(config):
        out.append(Difference(
            (key,), f"{who} sets {key}, which the manifest's LoRA method cannot state",
            "unset (peft's default)", show(config[key]),
            hint=f"train without {key}, or declare the method as kind: peft with peft_type "
            "LORA and its config",
        ))  # fmt: skip
    return out


def peft_differences(method: Any, config: Mapping[str, Any], *, who: str) -> list[Difference]:
    """A declared PEFT method (``kind: peft``): its type and every key of its config."""
    out: list[Difference] = []
    got_type = peft_type_of(config)
    if got_type != str(method.peft_type).upper():
        out.append(Difference(("peft_type",), f"{who}'s peft_type is not the manifest's",
                              str(method.peft_type), got_type))  # fmt: skip
    have = plain(dict(config))
    for key, want in sorted(method.config.items()):
        if key not in have:
            out.append(Difference(("config", key), f"{who}'s config has no {key}",
                                  show(want), "absent"))  # fmt: skip
            continue
        want_p = _setlike(want) if key in SET_KEYS else plain(want)
        if not _same(want_p, have[key]):
            out.append(Difference(("config", key), f"{who}'s {key} is not the manifest's",
                                  show(want_p), show(have[key])))  # fmt: skip
    if got_type == "LORA":  # every LoraConfig field is compared or refused
        for key in unstated(config, frozenset(method.config)):
            out.append(Difference(
                ("config", key), f"{who} sets {key}, which the manifest's method.config "
                "does not state", "unset (peft's default)", show(config[key]),
                hint=f"state it in method.config ({key}: {show(config[key])}) if it was "
                "trained so, else train without it",
            ))  # fmt: skip
    return out
