"""What training starts from: the adapter's starting weights and the collator.

Layer: edges - edge (integrations; torch is imported inside the functions).  The
Trainer guard calls ``judge_start`` at ``on_train_begin``, before step 1.

* Warm start (``drift.warm-start``): peft's default LoRA init (``method.init: true``
  or ``gaussian``) starts every ``lora_B`` at zero, so the adapter adds nothing at
  step 0.  A ``lora_B`` that is not zero then was trained before: the adapter was
  loaded from an earlier run (``PeftModel.from_pretrained(..., is_trainable=True)``),
  and this run would continue it while the manifest pins a fresh start, so it is
  refused.  A warm start the manifest pins (``method.init_adapter``) is judged
  instead by ``init_adapter``, whatever the init.  A resume
  (``train(resume_from_checkpoint=...)``: the Trainer restored a step above 0)
  is judged by ``resume`` (a checkpoint this manifest's run bound), not here.  Inits
  that start B elsewhere (``pissa``, ``olora``, ``loftq``, ``eva``, ``false``) are
  not judged here.
* Packing in a plain collator (``drift.unpinned-option``): a collator that packs the
  micro-batch into one row (transformers' ``DataCollatorWithFlattening``, padding-free)
  changes which tokens share a sequence; unless ``training.packing.enabled`` is
  pinned it is refused, naming ``data_collator``.
"""

from __future__ import annotations

import math
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.integrations.init_adapter import judge_init_adapter
from ftmanifest.integrations.options import RULE as UNPINNED
from ftmanifest.manifest.model import Manifest

WARM_RULE = "drift.warm-start"
ZERO_B_INITS = (True, "gaussian")  # peft inits that start every lora_B at zero
PACKING = ("DataCollatorWithFlattening",)  # collators that pack a micro-batch into one row
SHOWN = 3


def judge_start(
    model: Any, manifest: Manifest, path: str, *, resumed: bool, dataloader: Any = None
) -> list[Finding]:
    """Rows for a warm-started adapter and an unpinned packing collator."""
    rows = [] if resumed or model is None else _warm_start(model, manifest, path)
    return rows + _packing(dataloader, manifest, path)


def _lora_b(model: Any) -> list[tuple[str, float]]:
    """``(parameter name, Frobenius norm)`` of every LoRA B matrix (``lora_B``,
    ``lora_embedding_B``) of the model."""
    import torch

    out = []
    with torch.no_grad():
        for name, param in model.named_parameters():
            parts = name.split(".")
            if "lora_B" in parts or "lora_embedding_B" in parts:
                out.append((name, float(torch.linalg.vector_norm(param.detach().float()))))
    return out


def _warm_start(model: Any, manifest: Manifest, path: str) -> list[Finding]:
    method = getattr(manifest, "method", None)
    if method is not None and method.kind == "lora" and method.init_adapter is not None:
        return judge_init_adapter(model, method.init_adapter, path)
    if method is None or method.kind != "lora" or method.init not in ZERO_B_INITS:
        return []
    matrices = _lora_b(model)
    warm = [(n, v) for n, v in matrices if v != 0.0 or math.isnan(v)]
    if not warm:
        return []
    warm.sort(key=lambda item: -item[1] if not math.isnan(item[1]) else -math.inf)
    shown = "; ".join(f"{n}: norm {v:.4g}" for n, v in warm[:SHOWN])
    more = f" (and {len(warm) - SHOWN} more)" if len(warm) > SHOWN else ""
    return [
        Finding.at(
            ("method", "init"),
            kind="drift",
            rule=WARM_RULE,
            message=(
                f"the adapter starts from trained weights: {len(warm)} of {len(matrices)} "
                "lora_B matrices are not zero before step 1 (loaded from an earlier run?) "
                "and the manifest pins a fresh start"
            ),
            path=path,
            expected=f"every lora_B zero (init: {_init(method.init)} starts from B = 0)",
            observed=shown + more,
            hint=(
                "train from a fresh LoRA (get_peft_model(base, lora_config(MANIFEST))), resume "
                "this run with trainer.train(resume_from_checkpoint=...), or record the "
                "warm start as a new experiment: pin the starting adapter's file as "
                "method.init_adapter (path, digest) and re-sign"
            ),
        )
    ]


def _init(value: Any) -> str:
    return "true" if value is True else str(value)


def _collator(dataloader: Any) -> Any:
    """The collator the dataloader calls, unwrapped from the Trainer's column remover."""
    collate = getattr(dataloader, "collate_fn", None)
    for _ in range(4):
        inner = getattr(collate, "data_collator", None)
        if inner is None:
            break
        collate = inner
    return collate


def _packing(dataloader: Any, manifest: Manifest, path: str) -> list[Finding]:
    if dataloader is None or manifest.training.packing.enabled:
        return []
    collate = _collator(dataloader)
    names = {c.__name__ for c in type(collate).__mro__}
    if not names.intersection(PACKING):
        return []
    shown = f"{type(collate).__module__}.{type(collate).__qualname__}"
    return [
        Finding.at(
            ("training", "packing", "enabled"),
            kind="drift",
            rule=UNPINNED,
            message="the trainer's data_collator packs each micro-batch into one sequence "
            "and the manifest does not pin packing",
            path=path,
            expected="not packed (training.packing.enabled: false)",
            observed=f"{shown} (data_collator)",
            hint="pin packing as training.packing.enabled: true (and its mask_policy) and "
            "re-sign, or train with the default collator",
        )
    ]
