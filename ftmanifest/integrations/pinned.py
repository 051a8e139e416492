"""Load exactly the snapshot a manifest pins, and check a loaded model's weights against it.

Layer: edges - edge (integrations).  ``load_pinned`` is the safe way in for training
code: the revision is read from the manifest, never typed twice, and the model
is loaded from the pinned snapshot's folder, offline.  ``compare_weights`` is
the Trainer guard's spot check that the weights in memory are the pinned
files' (a model built with ``from_config`` from the pinned config carries the
pinned folder as its name).  torch, safetensors and transformers are imported
inside the functions only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.errors import UsageError
from ftmanifest.integrations.model_origin import WeightCheck, pinned_snapshot
from ftmanifest.manifest import LoadedManifest
from ftmanifest.manifest.renamed import renamed_keywords

# A leading slice of each tensor is enough to tell other weights apart, and
# keeps the check cheap on a 70B model: it reads a few KiB per tensor.
SLICE_ELEMENTS = 1024
_CHOSEN_BY_THE_MANIFEST = ("revision", "local_files_only", "cache_dir", "force_download")


def refuse_chosen(
    kwargs: dict[str, Any], chosen_here: tuple[str, ...], who: str, hint: str
) -> None:
    """``UsageError`` naming the keywords of ``kwargs`` that ``who`` takes from the manifest."""
    chosen = sorted(set(kwargs) & set(chosen_here))
    if chosen:
        raise UsageError(
            f"{who} chooses {', '.join(chosen)} from the manifest",
            field=chosen[0],
            expected="not given",
            observed=", ".join(f"{k}={kwargs[k]!r}" for k in chosen),
            hint=hint,
        )


@renamed_keywords(manifest_path="manifest", model_cls="model_class")
def load_pinned(
    manifest: str | Path,
    model_class: Any = None,
    *,
    tokenizer: bool = True,
    allow_outside: bool = False,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from exactly the snapshot ``manifest`` pins, offline.

    ``model_class`` defaults to ``AutoModelForCausalLM``; ``kwargs`` go to its
    ``from_pretrained`` (``dtype=``, ``device_map=``...), but none may replace
    a pinned config field (``rms_norm_eps=``, ``config=``...), another
    attention kernel than ``model.attn_implementation``, or a dtype
    ``training.precision`` does not train with (``UsageError`` naming it).  The tokenizer is
    ``None`` when ``tokenizer=False``.  The manifest's seeds are applied once the
    model is loaded, so what the script initialises next is the same every run.
    Raises ``SnapshotNotFoundError`` (field, expected, observed and the command
    that fetches it) when the pinned snapshot is not here.
    """
    from ftmanifest.manifest import load_manifest

    refuse_chosen(kwargs, _CHOSEN_BY_THE_MANIFEST, "load_pinned",
                  "drop it; to load another revision, change and re-lock the manifest")  # fmt: skip
    path = Path(manifest)
    loaded = load_manifest(path)
    folder = pinned_snapshot(loaded.manifest.model, path, allow_outside=allow_outside).folder
    if model_class is None:
        from transformers import AutoModelForCausalLM

        model_class = AutoModelForCausalLM
    from ftmanifest.integrations.model_config import refuse_overrides

    kwargs = refuse_overrides(kwargs, folder, loaded.manifest)
    # By folder, not repo id: nothing to resolve, and the guard traces this folder.
    model = model_class.from_pretrained(str(folder), local_files_only=True, **kwargs)
    _apply_seeds(loaded)  # what the script initialises next (a LoRA) draws from them
    tok = None
    if tokenizer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    return model, tok


def _apply_seeds(loaded: LoadedManifest) -> None:
    """The manifest's seeds, applied as the model is handed over: ``get_peft_model``
    right after initialises its LoRA weights from the pinned seeds, whatever the
    script drew before (three runs of one manifest ended at losses 1.63, 1.66 and
    1.99 when the LoRA was initialised before the Trainer seeded).  A manifest
    that pins no seeds applies none here; the guard judges the seeds it lacks."""
    from ftmanifest.seeding import seed_everything

    seeds = loaded.manifest.seeds
    if seeds.python is None and seeds.numpy is None and seeds.torch is None:
        return
    seed_everything(loaded)


def compare_weights(model: Any, folder: Path, *, max_tensors: int = 4096) -> WeightCheck:
    """Compare a leading slice of each safetensors tensor in ``folder`` with ``model``'s.

    Only tensors found in the model under the same name (or with the base
    model prefix, or under peft's ``base_layer``) and of the same shape are
    compared, in the model's dtype; quantized and sharded-away parameters are
    skipped.  ``compared == 0`` means nothing could be checked.
    """
    import torch
    from safetensors import safe_open

    params = _named_tensors(model)
    prefix = getattr(model, "base_model_prefix", "") or ""
    compared, differing = 0, []
    try:
        for file in sorted(folder.glob("*.safetensors")):
            with safe_open(str(file), framework="pt") as handle:
                for key in sorted(handle.keys())[: max(0, max_tensors - compared)]:
                    mine = _find(params, key, prefix)
                    stored = handle.get_slice(key)
                    if mine is None or not _comparable(mine, stored):
                        continue
                    n = _leading_rows(tuple(stored.get_shape()))
                    want = stored[:n] if mine.dim() else handle.get_tensor(key)
                    have = mine.detach()[:n] if mine.dim() else mine.detach()
                    compared += 1
                    if not torch.equal(want.to(have.dtype), have.cpu()):
                        differing.append(key)
    except Exception as exc:  # any unreadable file refuses (judge_weights), never passes
        return WeightCheck(compared, tuple(differing), f"{type(exc).__name__}: {exc}"[:300])
    return WeightCheck(compared, tuple(differing))


def _named_tensors(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        out[name] = tensor
        if ".base_layer." in name:  # peft moved the pretrained weight under base_layer
            out.setdefault(name.replace(".base_layer.", "."), tensor)
    return out


def _find(params: dict[str, Any], key: str, prefix: str) -> Any:
    candidates = [key]
    if prefix:
        candidates += [key.removeprefix(prefix + "."), f"{prefix}.{key}"]
    return next((params[c] for c in candidates if c in params), None)


def _comparable(tensor: Any, stored: Any) -> bool:
    import torch

    return (
        type(tensor) in (torch.Tensor, torch.nn.Parameter)  # not DTensor, Params4bit, Int8Params
        and stored.get_dtype().lstrip("B").startswith("F")
        and tuple(tensor.shape) == tuple(stored.get_shape())
        and tensor.device.type != "meta"
        and tensor.numel() > 0
        and tensor.is_floating_point()
    )


def _leading_rows(shape: tuple[int, ...]) -> int:
    if not shape:
        return 1
    row = 1
    for d in shape[1:]:
        row *= d
    return max(1, min(shape[0], SLICE_ELEMENTS // max(row, 1)))
