"""A preference trainer's reference model, traced to the pinned base like the policy.

Layer: edges - edge (integrations): reads the live Trainer; torch and peft imported
inside the functions only.

DPO (and KTO, GRPO with a KL term) score every pair against a reference
model: a reference that is not the pinned base trains the policy towards
another model's preferences while the manifest, the data and the policy all
verify.  TRL keeps it on the trainer (``DPOTrainer.ref_model``), which the
Trainer does not hand to callbacks, so ``find_trainer`` finds the Trainer
that is calling the guard on the stack.  ``judge_reference`` holds it to the
policy's rules (``model_origin.judge_origin``, then ``pinned.compare_weights``),
every row named ``ref_model`` (``extra["model"]``).  Its weights are compared
even on a resumed run: a reference never trains.

TRL's own references pass: ``ref_model=None`` under a plain model (TRL loads
the policy's origin again, traced here too, or computes the reference with
adapters off), and, under a peft model, the frozen adapter TRL adds beside
the policy's (``trl/trainer/dpo_trainer.py``: ``model.add_adapter("ref",
default_config)``, then copies ``.default.`` into ``.ref.``).
``trl_reference_adapter`` recognises that one: named ``ref``, the active
adapter's config, every parameter frozen, and (before the first step) equal to
the policy adapter's.  Anything else is a second adapter and stays refused.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ftmanifest.findings import Finding
from ftmanifest.integrations import model_origin

if TYPE_CHECKING:
    from types import FrameType

    from ftmanifest.integrations.model_origin import Pinned

REF_ADAPTER = "ref"  # the name TRL's DPOTrainer gives its frozen copy of the policy adapter
NAME = "ref_model"
ALWAYS_REFERENCED = ("dpo", "kto")  # objectives TRL always computes against a reference
_DEPTH = 64  # frames walked up from the callback to its Trainer


def find_trainer(callback: Any) -> Any | None:
    """The ``transformers.Trainer`` whose callbacks hold ``callback``, from the call stack."""
    trainer_class = getattr(sys.modules.get("transformers"), "Trainer", None)
    if trainer_class is None:
        return None
    frame: FrameType | None = sys._getframe(1)
    for _ in range(_DEPTH):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, trainer_class):
            handler = getattr(owner, "callback_handler", None)
            if any(c is callback for c in getattr(handler, "callbacks", ())):
                return owner
        frame = frame.f_back
    return None


def judge_reference(
    trainer: Any, found: bool, pinned: Pinned, objective: str | None
) -> tuple[dict[str, Any], list[Finding]]:
    """The run record's part for the reference model, and the rows refusing it."""
    if not found:
        why = {"traced": False, "reason": "the Trainer calling the guard was not found"}
        if objective not in ALWAYS_REFERENCED:
            return why, []
        row = Finding.at(
            ("training", "objective", "kind"),
            kind="drift",
            rule=model_origin.ORIGIN_RULE,
            message=f"{NAME}: the {objective} reference model cannot be traced: "
            "the guard was not called by a transformers Trainer",
            path=pinned.manifest,
            expected=f"the reference model of a Trainer, traced to {pinned.label()}",
            observed="no Trainer on the call stack",
            hint="train through the Trainer (trainer.train()), with FtManifestCallback "
            "in its callbacks",
        )
        return why, [row]
    ref = getattr(trainer, "ref_model", None)
    if ref is None:
        return {"traced": False, "reason": "none: the trainer computes the reference itself"}, []
    base = model_origin.unwrap_model(ref)
    name, commit = model_origin.name_and_commit(base)
    record: dict[str, Any] = {
        "traced": True,
        "name_or_path": name or None,
        "commit_hash": commit,
        "weights_compared": 0,
    }
    rows = model_origin.judge_origin(model_origin.read_origin(name, commit), pinned)
    if not rows and pinned.folder is not None:
        from ftmanifest.integrations.pinned import compare_weights

        check = compare_weights(base, pinned.folder)
        record["weights_compared"] = check.compared
        rows = model_origin.judge_weights(check, pinned)
        if check.compared == 0 and check.error is None:
            rows = [_nothing_compared(pinned)]
    return record, [_named(f) for f in rows]


def _nothing_compared(pinned: Pinned) -> Finding:
    return Finding.at(
        ("model", "files"),
        kind="drift",
        rule=model_origin.WEIGHTS_RULE,
        message="no tensor of the pinned snapshot matches a parameter of the model",
        path=pinned.manifest,
        expected=f"the weights of {pinned.label()}",
        observed="0 tensors compared",
        hint="",
    )


def _named(row: Finding) -> Finding:
    return row._replace(
        message=f"{NAME}: the reference model: {row.message}",
        extra={**row.extra, "model": NAME},
        hint=f"pass ref_model=None (TRL builds the reference from the policy's pinned base), "
        f"or load the reference from the pinned snapshot: {row.hint}",
    )


def trl_reference_adapter(
    model: Any, adapters: list[str], active: str | None, *, same: bool = True
) -> str | None:
    """``ref`` when it is TRL's frozen copy of the active adapter (module doc), else None.

    ``same``: its weights must equal the active adapter's (before the first step)."""
    if REF_ADAPTER not in adapters or active in (None, REF_ADAPTER) or len(adapters) != 2:
        return None
    configs = getattr(model, "peft_config", None)
    if not isinstance(configs, dict):
        return None
    mine, theirs = configs.get(active), configs.get(REF_ADAPTER)
    if mine is None or theirs is None or mine.to_dict() != theirs.to_dict():
        return None
    import torch

    params = dict(model.named_parameters())
    copies = {n: p for n, p in params.items() if f".{REF_ADAPTER}." in n}
    if not copies or any(p.requires_grad for p in copies.values()):
        return None
    if not same:
        return REF_ADAPTER
    for name, copy in copies.items():
        policy = params.get(name.replace(f".{REF_ADAPTER}.", f".{active}."))
        if policy is None or not torch.equal(policy.detach(), copy.detach()):
            return None
    return REF_ADAPTER
