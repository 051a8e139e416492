"""Every field of peft's ``LoraConfig``: its type, its default, and how ftmanifest treats it.

Layer: judging rooms - pure core (below ``method``, ``check`` and ``binding``; no peft
import).  The table is peft 0.21's ``peft/tuners/lora/config.py``; a test fails when the
installed peft has a field the table lacks.  Each field is one of

* ``compared``: compared with the manifest's LoRA ``method`` field named in ``why``
  (``method.lora_differences``); under ``kind: peft`` with ``method.config``;
* ``harmless``: read by peft at load without changing what the model computes
  (``why`` says why), never compared;
* ``refused``: changes the computation and the manifest's LoRA method has no
  field for it: refused unless at peft's default (``kind: peft`` may state it in
  ``method.config``).

Unknown fields (a newer peft) are refused unless they look like a default.
``type_problem`` names the first field of the wrong JSON type (an
``r: "four"`` used to crash the resolver); ``base_rewriting_init`` the
``init_lora_weights`` values peft reruns on load and that rewrite the base's
weights (``LoraLayer.update_layer``: PiSSA, CorDA, OLoRA, LoftQ).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Treatment = Literal["compared", "harmless", "refused"]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v: Any) -> bool:
    return _int(v) or isinstance(v, float)


def _strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _ints(v: Any) -> bool:
    return isinstance(v, list) and all(_int(x) for x in v)


def _opt(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _any(*checks: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: any(c(v) for c in checks)


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _obj(v: Any) -> bool:
    return isinstance(v, dict)


def _map(value: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, dict) and all(isinstance(k, str) and value(x)
                                                 for k, x in v.items())  # fmt: skip


def _pairs(v: Any) -> bool:
    return isinstance(v, list) and all(_ints(p) and len(p) == 2 for p in v)


@dataclass(frozen=True)
class LoraField:
    treatment: Treatment
    default: Any
    expected: str  # the JSON type, in words
    check: Callable[[Any], bool]
    why: str  # compared: the manifest field; harmless/refused: the reason


def _f(treatment: Treatment, default: Any, expected: str, check: Callable[[Any], bool],
       why: str) -> LoraField:  # fmt: skip
    return LoraField(treatment, default, expected, check, why)


OPT_STR, OPT_OBJ = "a string or null", "an object or null"
NAMES = "a list of module names, one regular expression, or null"
FIELDS: dict[str, LoraField] = {
    # written by peft or bind; not what the adapter computes
    "task_type": _f("harmless", None, OPT_STR, _opt(_str),
                    "picks the PeftModel wrapper class; the LoRA layers compute the same"),
    "peft_type": _f("compared", None, OPT_STR, _opt(_str), "method.kind"),
    "auto_mapping": _f("harmless", None, OPT_OBJ, _opt(_obj),
                       "AutoPeftModel's class hint; load_bound loads the bound base itself"),
    "peft_version": _f("harmless", None, OPT_STR, _opt(_str), "written by every save"),
    "base_model_name_or_path": _f("harmless", None, OPT_STR, _opt(_str),
                                  "rewritten by bind; load_bound loads the bound base, not this"),
    "revision": _f("harmless", None, OPT_STR, _opt(_str), "rewritten by bind, as above"),
    "inference_mode": _f("harmless", False, "true or false", _bool,
                         "only requires_grad; peft sets it on load"),
    # compared with the manifest's method
    "r": _f("compared", 8, "a positive integer", lambda v: _int(v) and v > 0, "method.r"),
    "target_modules": _f("compared", None, NAMES, _opt(_any(_str, _strs)),
                         "method.target_modules"),
    "exclude_modules": _f("compared", None, NAMES, _opt(_any(_str, _strs)),
                          "method.exclude_modules"),
    "lora_alpha": _f("compared", 8, "a number", _num, "method.alpha"),
    "lora_dropout": _f("compared", 0.0, "a number", _num, "method.dropout"),
    "fan_in_fan_out": _f("compared", False, "true or false", _bool, "method.fan_in_fan_out"),
    "bias": _f("compared", "none", "'none', 'all' or 'lora_only'",
               lambda v: v in ("none", "all", "lora_only"), "method.bias"),
    "use_rslora": _f("compared", False, "true or false", _bool, "method.use_rslora"),
    "modules_to_save": _f("compared", None, "a list of module names or null", _opt(_strs),
                          "method.modules_to_save"),
    "init_lora_weights": _f("compared", True, "true, false or an init name",
                            _any(_bool, _str), "method.init (base-rewriting inits refused)"),
    "rank_pattern": _f("compared", {}, "an object of module pattern to integer rank",
                       _opt(_map(_int)), "method.rank_pattern"),
    "alpha_pattern": _f("compared", {}, "an object of module pattern to number",
                        _opt(_map(_num)), "method.alpha_pattern"),
    "use_dora": _f("compared", False, "true or false", _bool, "method.use_dora"),
    "layer_replication": _f("compared", None, "a list of [start, end] integer pairs or null",
                            _opt(_pairs), "method.layer_replication"),
    # change what is computed; the LoRA method cannot state them
    "layers_to_transform": _f("refused", None, "an integer, a list of integers or null",
                              _opt(_any(_int, _ints)), "wraps only some layers"),
    "layers_pattern": _f("refused", None, "a string, a list of strings or null",
                         _opt(_any(_str, _strs)), "decides layers_to_transform's layers"),
    "megatron_config": _f("refused", None, OPT_OBJ, _opt(_obj),
                          "swaps in Megatron parallel linear layers"),
    "trainable_token_indices": _f("refused", None, "a list of integers, an object or null",
                                  _opt(_any(_ints, _obj)), "replaces embedding rows"),
    "loftq_config": _f("refused", {}, OPT_OBJ, _opt(_obj), "LoftQ quantises the base"),
    "velora_config": _f("refused", None, OPT_OBJ, _opt(_obj), "another LoRA variant"),
    "alora_invocation_tokens": _f("refused", None, "a list of integers or null", _opt(_ints),
                                  "aLoRA applies the adapter only after these tokens"),
    "use_qalora": _f("refused", False, "true or false", _bool, "QALoRA pools the input"),
    "monteclora_config": _f("refused", None, OPT_OBJ, _opt(_obj), "another LoRA variant"),
    "lora_bias": _f("refused", False, "true or false", _bool, "adds a bias to lora_B"),
    "target_parameters": _f("refused", None, "a list of parameter names or null", _opt(_strs),
                            "LoRA on bare parameters (MoE experts)"),
    "use_bdlora": _f("refused", None, OPT_OBJ, _opt(_obj), "block-diagonal LoRA variant"),
    "arrow_config": _f("refused", None, OPT_OBJ, _opt(_obj), "routes among adapters"),
    "kasa_config": _f("refused", None, OPT_OBJ, _opt(_obj), "another LoRA variant"),
    "ensure_weight_tying": _f("refused", False, "true or false", _bool,
                              "ties adapted embedding and head"),
    # read only by an init or an option that is itself compared or refused
    "megatron_core": _f("harmless", "megatron.core", OPT_STR, _opt(_str),
                        "read only with megatron_config (refused)"),
    "qalora_group_size": _f("harmless", 16, "an integer", _int,
                            "read only with use_qalora (refused)"),
    "eva_config": _f("harmless", None, OPT_OBJ, _opt(_obj),
                     "read only by the EVA init before training; the saved weights load over it"),
    "corda_config": _f("harmless", None, OPT_OBJ, _opt(_obj),
                       "read only by init_lora_weights='corda' (refused)"),
    "lora_ga_config": _f("harmless", None, OPT_OBJ, _opt(_obj),
                         "LoRA-GA init falls back to gaussian on load; saved weights load over it"),
    "runtime_config": _f("harmless", {"ephemeral_gpu_offload": False}, OPT_OBJ, _opt(_obj),
                         "where DoRA's init runs (GPU offload), not what is computed"),
}  # fmt: skip

COMPARED = frozenset(k for k, f in FIELDS.items() if f.treatment == "compared")
HARMLESS = frozenset(k for k, f in FIELDS.items() if f.treatment == "harmless")
# init_lora_weights values whose init peft reruns on load, writing the base's weights
BASE_REWRITING = ("pissa", "corda", "olora", "loftq")


def is_default(key: str, value: Any) -> bool:
    """``value`` is peft's default for ``key`` (a null, empty or false value
    for a field the table does not know)."""
    empty: tuple[Any, ...] = (None, False, {}, [], "")
    known = FIELDS.get(key)
    got = _norm(value)
    if known is None:
        return got in empty
    want = _norm(known.default)
    return got == want and type(got) is type(want) or (got in empty and want in empty)


def _norm(value: Any) -> Any:
    """8.0 as 8, as JSON readers disagree on it; anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def type_problem(config: Mapping[str, Any]) -> tuple[str, str, Any] | None:
    """``(field, expected, observed)`` for the first field of a type peft would not
    take, or None."""
    for key in sorted(config):
        known = FIELDS.get(key)
        if known is not None and not known.check(config[key]):
            return key, known.expected, config[key]
    return None


def base_rewriting_init(config: Mapping[str, Any]) -> str | None:
    """The ``init_lora_weights`` value when peft's load reruns an init that
    rewrites the base weights (``pissa``, ``pissa_niter_4``, ``corda``, ``olora``,
    ``loftq``), else None."""
    init = config.get("init_lora_weights")
    if isinstance(init, str) and init.lower().startswith(BASE_REWRITING):
        return init
    return None


def unstated(config: Mapping[str, Any], stated: frozenset[str]) -> list[str]:
    """Keys of ``config`` set away from peft's default that are neither harmless
    nor among ``stated`` (compared elsewhere)."""
    return sorted(k for k, v in config.items()
                  if k not in stated and k not in HARMLESS and k != "peft_type"
                  and not is_default(k, v))  # fmt: skip
