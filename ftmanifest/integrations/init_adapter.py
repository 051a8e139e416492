"""A pinned warm start: the LoRA's tensors before step 1 against ``method.init_adapter``.

Layer: edges - edge (integrations; torch, peft and safetensors are imported inside the
functions).  ``start_state.judge_start`` calls ``judge_init_adapter`` at
``on_train_begin`` when the manifest pins the adapter training starts from.

The pinned file's bytes are checked against its digest, then its tensors as
loaded are compared with the adapter the Trainer will train, as peft would save
it (``get_peft_model_state_dict``: the same names as the file), both as float32:
a run that loaded another adapter, a fresh LoRA, or the pinned file edited
since it was pinned is refused (``drift.warm-start`` at ``method.init_adapter``)
naming the digests of both tensor sets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from ftmanifest.hashing.files import hash_file
from ftmanifest.integrations.batches import batch_digest

RULE = "drift.warm-start"
LOC = ("method", "init_adapter")
SHOWN = 3


def judge_init_adapter(model: Any, pinned: Any, manifest_path: str) -> list[Finding]:
    """Rows refusing ``model`` when its adapter does not start from ``pinned``
    (the manifest's ``method.init_adapter``)."""
    file = Path(manifest_path).parent / pinned.path
    hint = (
        "load the pinned adapter to train on (PeftModel.from_pretrained(base, FOLDER, "
        "is_trainable=True)), or pin the adapter you start from: its path and "
        "digest (sha256 of the file) in method.init_adapter, and re-sign"
    )
    try:
        seen = hash_file(file, use_cache=False).digest
    except FtManifestError as exc:
        return [_row(manifest_path, "cannot read the pinned starting adapter",
                     f"{pinned.path} at {pinned.digest}", exc.message, hint)]  # fmt: skip
    if seen != pinned.digest:
        return [_row(manifest_path, "the pinned starting adapter's file changed since it was "
                     "pinned", f"{pinned.path} at {pinned.digest}", f"{pinned.path} at {seen}",
                     hint)]  # fmt: skip
    expected, observed = _pinned_tensors(file), _model_tensors(model)
    want, got = batch_digest(expected), batch_digest(observed)
    if want == got:
        return []
    diffs = sorted(set(expected) ^ set(observed))
    diffs += sorted(k for k in set(expected) & set(observed)
                    if not _same(expected[k], observed[k]))  # fmt: skip
    more = f" (and {len(diffs) - SHOWN} more)" if len(diffs) > SHOWN else ""
    return [
        _row(
            manifest_path,
            "the adapter does not start from the pinned one",
            f"the tensors of {pinned.path}: {want}",
            f"the model's adapter tensors: {got}; differ: {', '.join(diffs[:SHOWN])}{more}",
            hint,
        )
    ]


def _row(path: str, message: str, expected: str, observed: str, hint: str) -> Finding:
    return Finding.at(LOC, kind="drift", rule=RULE, message=message, path=path,
                      expected=expected, observed=observed, hint=hint)  # fmt: skip


def _as_float(tensors: dict[str, Any]) -> dict[str, Any]:
    import torch

    return {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in tensors.items()}


def _pinned_tensors(file: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return _as_float(load_file(str(file)))


def _model_tensors(model: Any) -> dict[str, Any]:
    """The adapter as peft saves it (the names of ``adapter_model.safetensors``)."""
    import torch
    from peft.utils import get_peft_model_state_dict

    with torch.no_grad():
        return _as_float(dict(get_peft_model_state_dict(model)))


def _same(a: Any, b: Any) -> bool:
    import torch

    return bool(a.shape == b.shape and torch.equal(a, b))
