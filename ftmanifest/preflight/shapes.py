"""A causal LM's tensors and sizes from its ``config.json``, without its weights.

Layer: judging rooms - pure core (``architecture`` takes a config dict and optional
safetensors shapes; ``read_architecture`` is the edge that reads them).
Used by ``estimate``.  Two families are known from the config alone, with
transformers' own names and shapes (``nn.Linear`` weights are ``[out, in]``,
GPT-2's ``Conv1D`` weights ``[in, out]``):

- **Llama-like** (llama, mistral, qwen2, qwen3): ``embed_tokens [V, h]``; per
  layer ``q_proj [heads*hd, h]``, ``k_proj``/``v_proj [kv*hd, h]`` (GQA:
  ``num_key_value_heads``), ``o_proj [h, heads*hd]`` (biases with
  ``attention_bias``; qwen2 has q/k/v biases), ``gate_proj``/``up_proj [i, h]``,
  ``down_proj [h, i]``, two RMSNorm weights ``[h]``; a final norm; ``lm_head
  [V, h]`` unless ``tie_word_embeddings``.
- **GPT-2-like** (gpt2): ``wte [V, h]``, ``wpe [P, h]``; per layer two
  LayerNorms (weight and bias), ``c_attn [h, 3h]``, ``c_proj [h, h]``, ``c_fc
  [h, n_inner]``, ``c_proj [n_inner, h]`` with biases; ``ln_f``; the head tied
  to ``wte`` (counted once, as ``model.parameters()`` does).

Any other ``model_type`` is counted from the safetensors headers when the
folder has them (sizes for the activations still come from the config's
``hidden_size``/``num_hidden_layers``...); without headers it is refused as an
unknown architecture.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError
from ftmanifest.hfcache import local_snapshot

Shape = tuple[int, ...]
LLAMA_LIKE = frozenset({"llama", "mistral", "qwen2", "qwen3"})
GPT2_LIKE = frozenset({"gpt2"})
# activations whose transformers implementation is one fused op (saves its input only)
FUSED_ACTIVATIONS = frozenset({"silu", "swish", "relu", "gelu", "gelu_pytorch_tanh", "quick_gelu"})


class UnknownArchitectureError(InputError):
    """The config names an architecture this estimator cannot size."""

    reason = "unknown-architecture"


@dataclass(frozen=True)
class Architecture:
    """What the estimate needs to know about a model."""

    family: str  # "llama", "gpt2", or "headers" (counted from safetensors headers)
    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    gated_mlp: bool
    activation: str
    dtype: str  # the config's torch_dtype (how the checkpoint is stored)
    tied: bool
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    shapes: Mapping[str, Shape] = field(default_factory=dict)

    @property
    def params(self) -> int:
        return sum(numel(s) for s in self.shapes.values())

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def dtype_shapes(self) -> dict[str, tuple[str, Shape]]:
        """``shapes`` in the ``adapter.architecture`` form (name -> (dtype, shape))."""
        return {n: (self.dtype, s) for n, s in self.shapes.items()}


def numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _need(config: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    if default is not None:
        return default
    raise InputError(
        f"config.json has no {keys[0]}",
        field=keys[0],
        expected=f"an integer {' or '.join(keys)}",
        observed="absent",
        hint="re-save the model's config with save_pretrained",
    )


def architecture(
    config: Mapping[str, Any], header_shapes: Mapping[str, tuple[str, Shape]] | None = None
) -> Architecture:
    """The model ``config`` describes; ``header_shapes`` (from safetensors headers)
    count the parameters of a model type not known here."""
    model_type = str(config.get("model_type") or "")
    if model_type in GPT2_LIKE:
        return _gpt2(config)
    if model_type in LLAMA_LIKE:
        return _llama(config)
    if not header_shapes:
        raise UnknownArchitectureError(
            f"unknown architecture {model_type or '(no model_type)'}: the estimate counts "
            "parameters from the config for Llama-like and GPT-2-like causal LMs only",
            field="model_type",
            expected=", ".join(sorted(LLAMA_LIKE | GPT2_LIKE)) + ", or safetensors weights",
            observed=model_type or "absent",
            hint="put the checkpoint's *.safetensors beside config.json (only their headers "
            "are read), or measure instead: ftmanifest preflight M --only step",
        )
    hidden = int(_need(config, "hidden_size", "n_embd", "d_model"))
    heads = int(_need(config, "num_attention_heads", "n_head"))
    dtypes = {d for d, _ in header_shapes.values()}
    return Architecture(
        family="headers",
        model_type=model_type,
        hidden=hidden,
        layers=int(_need(config, "num_hidden_layers", "n_layer", "num_layers")),
        heads=heads,
        kv_heads=int(_need(config, "num_key_value_heads", default=heads)),
        head_dim=int(_need(config, "head_dim", default=hidden // heads)),
        intermediate=int(_need(config, "intermediate_size", "n_inner", default=4 * hidden)),
        vocab=int(_need(config, "vocab_size")),
        gated_mlp=str(config.get("hidden_act", "")) in ("silu", "swish"),
        activation=str(config.get("hidden_act") or config.get("activation_function") or "gelu"),
        dtype=dtypes.pop() if len(dtypes) == 1 else "mixed",
        tied=bool(config.get("tie_word_embeddings", True)),
        shapes={n: s for n, (_, s) in header_shapes.items()},
    )


def _llama(config: Mapping[str, Any]) -> Architecture:
    h = int(_need(config, "hidden_size", default=4096))
    heads = int(_need(config, "num_attention_heads", default=32))
    kv = int(_need(config, "num_key_value_heads", default=heads))
    hd = int(_need(config, "head_dim", default=h // heads))
    inter = int(_need(config, "intermediate_size", default=11008))
    vocab = int(_need(config, "vocab_size", default=32000))
    layers = int(_need(config, "num_hidden_layers", default=32))
    tied = bool(config.get("tie_word_embeddings", False))
    attn_bias = bool(config.get("attention_bias", False))
    qkv_bias = attn_bias or config.get("model_type") == "qwen2"
    mlp_bias = bool(config.get("mlp_bias", False))
    shapes: dict[str, Shape] = {"model.embed_tokens.weight": (vocab, h)}
    for i in range(layers):
        p = f"model.layers.{i}."
        attn = {"q_proj": (heads * hd, h), "k_proj": (kv * hd, h), "v_proj": (kv * hd, h),
                "o_proj": (h, heads * hd)}  # fmt: skip
        for name, (out, inp) in attn.items():
            shapes[f"{p}self_attn.{name}.weight"] = (out, inp)
            if attn_bias or (qkv_bias and name != "o_proj"):
                shapes[f"{p}self_attn.{name}.bias"] = (out,)
        if config.get("model_type") == "qwen3":
            shapes[f"{p}self_attn.q_norm.weight"] = (hd,)
            shapes[f"{p}self_attn.k_norm.weight"] = (hd,)
        for name, (out, inp) in {"gate_proj": (inter, h), "up_proj": (inter, h),
                                 "down_proj": (h, inter)}.items():  # fmt: skip
            shapes[f"{p}mlp.{name}.weight"] = (out, inp)
            if mlp_bias:
                shapes[f"{p}mlp.{name}.bias"] = (out,)
        shapes[f"{p}input_layernorm.weight"] = (h,)
        shapes[f"{p}post_attention_layernorm.weight"] = (h,)
    shapes["model.norm.weight"] = (h,)
    if not tied:
        shapes["lm_head.weight"] = (vocab, h)
    return Architecture(
        family="llama", model_type=str(config.get("model_type")), hidden=h, layers=layers,
        heads=heads, kv_heads=kv, head_dim=hd, intermediate=inter, vocab=vocab, gated_mlp=True,
        activation=str(config.get("hidden_act") or "silu"), dtype=_dtype(config), tied=tied,
        attention_dropout=float(config.get("attention_dropout") or 0.0), shapes=shapes,
    )  # fmt: skip


def _gpt2(config: Mapping[str, Any]) -> Architecture:
    h = int(_need(config, "n_embd", "hidden_size", default=768))
    heads = int(_need(config, "n_head", default=12))
    inner = int(config.get("n_inner") or 4 * h)
    vocab = int(_need(config, "vocab_size", default=50257))
    positions = int(_need(config, "n_positions", default=1024))
    layers = int(_need(config, "n_layer", default=12))
    tied = bool(config.get("tie_word_embeddings", True))
    shapes: dict[str, Shape] = {"transformer.wte.weight": (vocab, h),
                                "transformer.wpe.weight": (positions, h)}  # fmt: skip
    for i in range(layers):
        p = f"transformer.h.{i}."
        conv = {"attn.c_attn": (h, 3 * h), "attn.c_proj": (h, h), "mlp.c_fc": (h, inner),
                "mlp.c_proj": (inner, h)}  # fmt: skip
        for name, (d_in, d_out) in conv.items():
            shapes[f"{p}{name}.weight"] = (d_in, d_out)
            shapes[f"{p}{name}.bias"] = (d_out,)
        for norm in ("ln_1", "ln_2"):
            shapes[f"{p}{norm}.weight"] = (h,)
            shapes[f"{p}{norm}.bias"] = (h,)
    shapes["transformer.ln_f.weight"] = (h,)
    shapes["transformer.ln_f.bias"] = (h,)
    if not tied:
        shapes["lm_head.weight"] = (vocab, h)
    return Architecture(
        family="gpt2", model_type="gpt2", hidden=h, layers=layers, heads=heads, kv_heads=heads,
        head_dim=h // heads, intermediate=inner, vocab=vocab, gated_mlp=False,
        activation=str(config.get("activation_function") or "gelu_new"), dtype=_dtype(config),
        tied=tied, hidden_dropout=float(config.get("resid_pdrop", 0.1) or 0.0),
        attention_dropout=float(config.get("attn_pdrop", 0.1) or 0.0), shapes=shapes,
    )  # fmt: skip


def _dtype(config: Mapping[str, Any]) -> str:
    value = config.get("dtype") or config.get("torch_dtype") or "float32"
    return str(value).removeprefix("torch.")


def read_architecture(folder: Path) -> Architecture:
    """The edge: ``folder``'s config.json, and its safetensors headers when the
    config alone does not say (headers only; no tensor data is read)."""
    from ftmanifest.adapter.base import BaseModel

    base = BaseModel(local_snapshot(folder).folder)  # a missing folder says so
    config = base.raw_config()
    if config is None:
        raise InputError(
            "the model folder has no config.json",
            path=str(folder / "config.json"),
            expected="the model's config.json",
            observed="absent",
            hint="download or save the model with its config (save_pretrained)",
        )
    shapes = None
    if str(config.get("model_type") or "") not in LLAMA_LIKE | GPT2_LIKE:
        try:
            shapes = base.shapes() if base.files else None
        except InputError:
            shapes = None
    try:
        return architecture(config, shapes)
    except InputError as exc:
        exc.path = exc.path or str(base.folder / "config.json")
        raise
