"""A base model's module tree as its safetensors headers show it.

Layer: judging rooms - pure core (shapes and config in, names and kinds out; below
``architecture`` and ``check``).  Module names come from tensor names
(``a.b.weight`` is module ``a.b``); a module owning a 2-D ``weight`` is an
Embedding when named so (``wte``, ``embed_tokens``...) or when the adapter
holds ``lora_embedding_A`` for it, a GPT-2 ``Conv1D`` in the Conv1D model
types, else a Linear; 3-D to 5-D weights are convolutions; the output
embedding is ``lm_head`` or alike.  Headers do not give ``named_modules()``
order: the tree is in name order with the output layer last (only peft's
final ``fan_in_fan_out`` value could depend on it, and the comparisons do
not).  A checkpoint saved without its task head's prefix (hub ``gpt2``:
``h.0...`` for module ``transformer.h.0...``) is renamed into the model's
namespace the adapter's names show (``model_namespace``); a GPT-2 checkpoint
that leaves out its tied ``lm_head`` gets it back (``with_tied_head``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ftmanifest.manifest import targets as tg

Shapes = Mapping[str, tuple[str, tuple[int, ...]]]
PEFT_PREFIX = "base_model.model."
CONV1D_MODEL_TYPES = frozenset({"gpt2", "openai-gpt", "imagegpt", "decision_transformer"})
EMBEDDING_NAMES = frozenset({"wte", "wpe", "embed_tokens", "embed_in", "word_embeddings"})
OUTPUT_NAMES = frozenset({"lm_head", "embed_out", "output"})
_LORA_PARTS = ("lora_A.weight", "lora_B.weight", "lora_B.bias", "lora_embedding_A",
               "lora_embedding_B", "lora_magnitude_vector", "base_layer.weight")  # fmt: skip


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


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def output_name(shapes: Shapes) -> str | None:
    """The output embedding (``lm_head``...), the outermost one when several."""
    heads = [m for m in module_weights(shapes) if m.rpartition(".")[2] in OUTPUT_NAMES]
    return min(heads, key=lambda m: (m.count("."), m)) if heads else None


def header_tree(
    shapes: Shapes,
    config: Mapping[str, Any] | None = None,
    embeddings: frozenset[str] | None = None,
) -> tg.Tree:
    """The base's module tree as its headers show it (see the module doc);
    ``embeddings``: modules the adapter's own keys show to be embeddings."""
    ndim = {n.removesuffix(".weight"): len(s) for n, (_, s) in shapes.items()
            if n.endswith(".weight")}  # fmt: skip
    output = output_name(shapes)
    conv1d = (config or {}).get("model_type") in CONV1D_MODEL_TYPES
    known = embeddings or frozenset()

    def kind(module: str) -> str:
        dims = ndim.get(module)
        if dims == 2:
            if module in known or module.rpartition(".")[2] in EMBEDDING_NAMES:
                return tg.EMBEDDING
            return tg.CONV1D if conv1d and module != output else tg.LINEAR
        return tg.CONV if dims in (3, 4, 5) else tg.OTHER

    names = sorted(all_modules(shapes), key=_natural)
    if output is not None:
        names = [n for n in names if n != output] + [output]
    return tg.tree(((n, kind(n)) for n in names), output)


def replicate_shapes(shapes: Shapes, layer_map: Any) -> dict[str, Any] | None:
    """``shapes`` with the layers laid out as peft's ``layer_replication`` lays
    them (each copy the shapes of its source layer); None when peft could not."""
    if not layer_map:
        return dict(shapes)
    pairs = tg.replicated_names(list(shapes), tg._ranges(layer_map) or ())
    return None if pairs is None else {new: shapes[old] for new, old in pairs}


def to_base_names(adapter_shapes: Shapes, base: Shapes) -> dict[str, str]:
    """Adapter tensor name -> the same tensor's name in the base's namespace."""
    modules = all_modules(base) | set(module_weights(base))
    out: dict[str, str] = {}
    for name in adapter_shapes:
        inner = name.removeprefix(PEFT_PREFIX)
        module, part = split_part(inner)
        if module not in modules and module.partition(".")[2] in modules:
            module = module.partition(".")[2]
        out[name] = f"{module}.{part}" if module else part
    return out


def model_namespace(adapter_shapes: Shapes, base: Shapes) -> dict[str, Any]:
    """``base`` named as the model the adapter was trained on names it: a
    checkpoint saved without its head's prefix (hub ``gpt2``: ``h.0...`` for
    ``transformer.h.0...``) gets the one prefix the adapter's names show, so
    peft's full names (``all-linear`` saves them) resolve on it; top-level
    output heads (``lm_head``) keep their names."""
    modules = all_modules(base)
    top = {n.partition(".")[0] for n in modules}
    heads: set[str] = set()
    for name in adapter_shapes:
        module = split_part(name.removeprefix(PEFT_PREFIX))[0]
        lead, _, rest = module.partition(".")
        if module not in modules and lead not in top and rest in modules:
            heads.add(lead)
    if len(heads) != 1:
        return dict(base)
    (lead,) = heads
    return {n if n.partition(".")[0] in OUTPUT_NAMES else f"{lead}.{n}": s
            for n, s in base.items()}  # fmt: skip


def split_part(name: str) -> tuple[str, str]:
    for part in _LORA_PARTS:
        if name.endswith("." + part):
            return name[: -len(part) - 1], part
    module, _, param = name.rpartition(".")
    return module, param


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
