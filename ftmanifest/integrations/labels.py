"""Every training batch's loss positions against the pinned ``loss_on``, step by step.

Layer: edges - edge (integrations; torch is imported inside the functions).  The
Trainer guard judges the first batch before step 1 (``runtime.judge_batch``); a
collator switched later (by a callback, or by a collator of one's own that changes
its mind) could put loss on the prompt for the rest of the run unseen.  Under
``training.loss_on: completion`` a ``LabelGuard`` holds every micro-batch that runs
with gradients to it, from a forward pre-hook on the model the Trainer trains (as
``integrations.batches`` records the first ones: evaluation and no-grad forwards are
not training batches).

The rule is cheap and holds for every completion-only format: the prompt comes first,
so the first real token of each sequence (the first position its attention mask
keeps) carries no loss (label -100).  A collator that labels every token
(``DataCollatorForLanguageModeling(mlm=False)``) labels that one too.  A few tensor
ops a micro-batch and one host sync; a batch without labels of ``input_ids``' shape
(the loss computed outside the model) is counted as not judged.  The first one
that breaks the rule calls ``refuse`` with a ``drift.loss-mask`` row, before the
batch's optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.integrations.batches import TrainingForwardHook
from ftmanifest.manifest.model import Manifest

RULE = "drift.loss-mask"
IGNORE = -100
HINT = (
    "keep the collator that labels the prompt -100 for the whole run (a callback or a "
    "collator that switches to labelling every token puts loss on the prompt), or pin "
    "training.loss_on: all and re-sign"
)


class LabelGuard(TrainingForwardHook):
    """A forward pre-hook on ``model`` that judges each training batch's labels.

    ``refuse(rows)`` is called with the row for the first batch that puts loss on the
    prompt (it is expected to raise); ``record["loss_mask"]`` counts the batches."""

    def __init__(
        self,
        model: Any,
        loss_on: str,
        path: str,
        refuse: Callable[[list[Finding]], None],
        record: dict[str, Any],
    ) -> None:
        self.loss_on, self.path, self.refuse = loss_on, path, refuse
        self.state: dict[str, Any] = {"loss_on": loss_on, "judged": 0, "not_judged": 0}
        record["loss_mask"] = self.state
        if not self._attach(model):
            self.state["why_not"] = "the Trainer handed the guard no model"

    def _seen(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        if not self.training_forward(module):
            return None  # an evaluation's or a reference model's forward
        ids: Any = kwargs.get("input_ids", args[0] if args and torch.is_tensor(args[0]) else None)
        labels: Any = kwargs.get("labels")
        if not (torch.is_tensor(ids) and torch.is_tensor(labels)) or (
            ids.dim() != 2 or labels.shape != ids.shape
        ):
            self.state["not_judged"] += 1
            return None
        mask: Any = kwargs.get("attention_mask")
        if torch.is_tensor(mask) and mask.shape == ids.shape:
            first = mask.ne(0).int().argmax(dim=1, keepdim=True)
        else:
            first = torch.zeros((ids.shape[0], 1), dtype=torch.long, device=ids.device)
        wrong = labels.gather(1, first.to(labels.device)).ne(IGNORE).squeeze(1)
        self.state["judged"] += 1
        if not bool(wrong.any()):
            return None
        row = int(wrong.nonzero()[0, 0])
        carried = int(labels[row].ne(IGNORE).sum())
        self.remove()
        finding = Finding.at(
            ("training", "loss_on"),
            kind="drift",
            rule=RULE,
            message=(
                f"training batch {self.state['judged']} puts loss on the prompt: its first "
                "token carries loss and the manifest pins completion-only loss"
            ),
            path=self.path,
            expected="completion: the first token of every sequence carries no loss",
            observed=(
                f"sequence {row}: its first token carries loss "
                f"({carried} of {ids.shape[1]} positions carry loss)"
            ),
            hint=HINT,
        )
        try:
            self.refuse([finding])
        except Exception as exc:
            if hasattr(exc, "hint"):
                exc.hint = HINT  # the step refusal's own hint speaks of learning rates
            raise
        return None


def install(
    model: Any, manifest: Manifest | None, path: str, refuse: Callable[[list[Finding]], None],
    record: dict[str, Any],
) -> LabelGuard | None:  # fmt: skip
    """A ``LabelGuard`` when the manifest pins ``loss_on: completion``, else None."""
    if manifest is None or manifest.training.loss_on != "completion":
        return None
    return LabelGuard(model, "completion", path, refuse, record)
