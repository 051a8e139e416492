"""What the trainer really fed the model: its first micro-batches, and the start's digests.

Layer: edges - edge (integrations).  torch is imported inside the functions; the
Trainer guard (``integrations.transformers``) calls ``start_digest`` at
``on_train_begin`` and installs a ``BatchRecorder`` when it lets training start.

``data sample`` formats records the way ftmanifest's own preprocessing does;
a training script, a collator or TRL's ``SFTTrainer``/``DPOTrainer`` may do
otherwise.  The recorder shows what they did: a forward pre-hook on the model
the Trainer trains sees the very keyword arguments the loss is computed from
(after the collator and the trainer's own processing), and keeps, for the first
``MAX_BATCHES`` micro-batches that run with gradients (a reference model's or an
evaluation's no-grad forwards are not training batches), up to
``MAX_EXAMPLES`` rows each: the token ids, which of them carry loss (``labels
!= -100``; ``DPOTrainer`` builds its labels from its completion mask, so its
rows are its chosen and rejected completions, paired), the attention mask, and
the decoded text with every span the scan rules call a secret or personal data
replaced (the ids of those tokens are withheld too).  Then the hook removes
itself.

Two digests tell attempts of one manifest apart (``ledger.starts``):
``initial_trainable_digest`` over the trainable parameters (names, dtypes,
shapes, bytes) before the first step, and ``first_batch_digest`` over the
first micro-batch's tensors (keys sorted, dtype and shape included).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from itertools import groupby
from typing import Any

from ftmanifest.scan.redact import redact_bytes
from ftmanifest.scan.text.text import scan_buffer

MAX_BATCHES = 2  # micro-batches recorded, then the hook removes itself
MAX_EXAMPLES = 8  # rows kept per micro-batch (DPO: 4 chosen/rejected pairs)
MAX_TOKENS = 256  # ids and masks kept per row
MAX_TEXT = 2000  # characters of decoded text kept per row
SCAN_WINDOW = 64  # tokens past the cut decoded too, so a secret cut there is still found
NOT_BATCH = frozenset({"num_items_in_batch"})  # a loss normaliser, not data
WHERE = "(a training batch)"


def _tensor_bytes(tensor: Any) -> bytes:
    import torch

    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return bytes(flat.view(torch.uint8).numpy().tobytes()) if flat.numel() else b""


def _digest(named: Iterable[tuple[str, Any]]) -> tuple[str, int, int]:
    """``sha256:`` over each (name, tensor) in name order: name, dtype, shape, bytes;
    with how many tensors and bytes it covers."""
    h = hashlib.sha256()
    count = size = 0
    for name, tensor in sorted(named, key=lambda item: item[0]):
        data = _tensor_bytes(tensor)
        head = f"{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0{len(data)}\n"
        h.update(head.encode("utf-8"))
        h.update(data)
        count, size = count + 1, size + len(data)
    return "sha256:" + h.hexdigest(), count, size


def start_digest(model: Any) -> dict[str, Any]:
    """``initial_trainable_digest``: the trainable parameters as training begins
    (under FSDP or ZeRO-3, this rank's shards of them)."""
    if model is None or not hasattr(model, "named_parameters"):
        why = "the Trainer handed the guard no model"
        return {"initial_trainable_digest": None, "initial_trainable": {"why_not": why}}
    began = time.perf_counter()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    digest, count, size = _digest(named)
    return {
        "initial_trainable_digest": digest,
        "initial_trainable": {
            "tensors": count,
            "bytes": size,
            "seconds": round(time.perf_counter() - began, 3),
        },
    }


def batch_digest(tensors: Mapping[str, Any]) -> str:
    """``first_batch_digest``: the micro-batch's tensors, keys sorted, dtype and shape included."""
    return _digest(tensors.items())[0]


class TrainingForwardHook:
    """A forward pre-hook on the model a Trainer trains that sees training batches
    only: a forward in training mode with gradients on (a reference model's and an
    evaluation's forwards run without).  Subclasses define ``_seen``."""

    handle: Any = None

    def _attach(self, model: Any) -> bool:
        """Hook ``model``; False when the Trainer handed no model that can be hooked."""
        if model is None or not hasattr(model, "register_forward_pre_hook"):
            return False
        self.handle = model.register_forward_pre_hook(self._seen, with_kwargs=True)
        return True

    def remove(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None

    @staticmethod
    def training_forward(module: Any) -> bool:
        import torch

        return bool(module.training) and torch.is_grad_enabled()

    def _seen(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        raise NotImplementedError


class BatchRecorder(TrainingForwardHook):
    """A forward pre-hook that writes the first micro-batches into ``record``."""

    def __init__(self, model: Any, args: Any, tokenizer: Any, record: dict[str, Any]) -> None:
        self.record = record
        self.tokenizer = tokenizer
        self.pairs = type(args).__name__ == "DPOConfig"
        self.batches: list[dict[str, Any]] = []
        record["first_batch_digest"] = None
        record["batches"] = {
            "recorded_by": "a forward pre-hook on the model the Trainer trains",
            "arguments": f"{type(args).__module__}.{type(args).__qualname__}",
            "kind": "preference pairs (chosen, rejected)" if self.pairs else "causal LM",
            "micro_batches": self.batches,
            "limits": {
                "batches": MAX_BATCHES,
                "examples": MAX_EXAMPLES,
                "tokens": MAX_TOKENS,
                "text": MAX_TEXT,
            },  # fmt: skip
            "why_not": "no training forward pass ran",
        }
        if not self._attach(model):
            record["batches"]["why_not"] = "the Trainer handed the guard no model"

    def _seen(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        if not self.training_forward(module):
            return None  # a reference model's or an evaluation's forward, not a training batch
        tensors = {k: v for k, v in kwargs.items() if torch.is_tensor(v) and k not in NOT_BATCH}
        if args and torch.is_tensor(args[0]):
            tensors.setdefault("input_ids", args[0])
        if not self.batches:
            self.record["first_batch_digest"] = batch_digest(tensors)
            self.record["batches"]["why_not"] = None
        self.batches.append(self._batch(tensors))
        if len(self.batches) >= MAX_BATCHES:
            self.remove()
        return None

    def _batch(self, tensors: Mapping[str, Any]) -> dict[str, Any]:
        shapes = {k: {"dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape)}
                  for k, v in sorted(tensors.items())}  # fmt: skip
        out: dict[str, Any] = {"index": len(self.batches), "tensors": shapes, "examples": []}
        ids, labels = tensors.get("input_ids"), tensors.get("labels")
        if ids is None or ids.dim() != 2:
            out["why_not"] = "the model was called without a 2-D input_ids"
            return out
        out["loss_mask_from"] = (
            "labels != -100" if labels is not None and labels.shape == ids.shape
            else None
        )  # fmt: skip
        if out["loss_mask_from"] is None:
            out["why_no_loss_mask"] = (
                "the model was called without labels of input_ids' shape: the loss is computed "
                "outside it (compute_loss_func, label smoothing, a trainer's own loss)"
            )
        attention = tensors.get("attention_mask")
        if attention is not None and attention.shape != ids.shape:
            attention = None  # a 4-D mask: padding is not read off it
        rows = ids.shape[0]
        for row, pair in self._rows(rows):
            out["examples"].append(
                self._example(
                    row,
                    pair,
                    ids[row].tolist(),
                    None
                    if labels is None or out["loss_mask_from"] is None
                    else (labels[row] != -100).tolist(),
                    None if attention is None else attention[row].tolist(),
                )
            )
        return out

    def _rows(self, rows: int) -> list[tuple[int, str | None]]:
        if self.pairs and rows % 2 == 0:
            half = rows // 2  # DPOTrainer stacks the chosen rows, then the rejected ones
            n = min(half, MAX_EXAMPLES // 2)
            return [x for i in range(n) for x in ((i, "chosen"), (half + i, "rejected"))]
        return [(i, None) for i in range(min(rows, MAX_EXAMPLES))]

    def _example(
        self, row: int, pair: str | None, ids: list[int], loss: list[bool] | None,
        attention: list[int] | None,
    ) -> dict[str, Any]:  # fmt: skip
        kept = [i for i in range(len(ids)) if attention is None or attention[i]]
        ex: dict[str, Any] = {
            "row": row,
            "pair": pair,
            "length": len(ids),
            "tokens": len(kept),
            "loss_tokens": None if loss is None else sum(1 for x in loss if x),
            "input_ids": ids[:MAX_TOKENS],
            "loss_mask": None if loss is None else _bits(loss[:MAX_TOKENS]),
            "attention_mask": None if attention is None else _bits(attention[:MAX_TOKENS]),
            "cut": len(ids) > MAX_TOKENS,
            "text": None,
            "redacted": 0,
        }  # fmt: skip
        if self.tokenizer is None or not hasattr(self.tokenizer, "decode"):
            ex["why_no_text"] = "the Trainer was given no tokenizer (processing_class)"
            return ex
        window = [ids[i] for i in kept[: MAX_TOKENS + SCAN_WINDOW]]
        text, hidden, found = redact_tokens(self.tokenizer, window)
        ex["text"], ex["redacted"] = text[:MAX_TEXT], found
        ex["text_cut"] = len(text) > MAX_TEXT or len(kept) > len(window)
        if loss is not None:
            marks = [loss[i] for i in kept[: len(window)]]
            ex["marked"] = marked_text(self.tokenizer, window, marks, hidden)
        for k in hidden:
            position = kept[k]
            if position < MAX_TOKENS:
                ex["input_ids"][position] = None  # withheld: the ids would spell the secret
        return ex


LOSS_OPEN, LOSS_CLOSE = "[[", "]]"  # around the tokens that carry loss, in ``marked``


def marked_text(tokenizer: Any, ids: list[int], loss: list[bool], hidden: set[int]) -> str | None:
    """The decoded text with ``[[...]]`` around each run of tokens that carry loss and
    ``[REDACTED]`` for the withheld ones; ``None`` if the scan rules still find something."""
    parts: list[str] = []
    for (carries, withheld), run in groupby(range(len(ids)), lambda k: (loss[k], k in hidden)):
        shown = "[REDACTED]" if withheld else _decode(tokenizer, [ids[k] for k in run])
        parts.append(f"{LOSS_OPEN}{shown}{LOSS_CLOSE}" if carries else shown)
    text = "".join(parts).replace(LOSS_CLOSE + LOSS_OPEN, "")[:MAX_TEXT]
    return None if _hits(text) else text


def _bits(values: Iterable[Any]) -> str:
    return "".join("1" if x else "0" for x in values)


def _decode(tokenizer: Any, ids: list[int]) -> str:
    return str(tokenizer.decode(ids, skip_special_tokens=False,
                                clean_up_tokenization_spaces=False))  # fmt: skip


def _hits(text: str) -> list[tuple[int, int, str]]:
    raw = text.encode("utf-8", "surrogatepass")
    return [(f.extra["span"][0], f.extra["span"][1], f.rule or "secret")
            for f in scan_buffer(raw, path=WHERE)]  # fmt: skip


def redact_tokens(tokenizer: Any, ids: list[int]) -> tuple[str, set[int], int]:
    """The decoded text with what the scan rules find replaced, the positions of
    the tokens that spell it, and how many spans were found.

    A token is withheld when the bytes it adds to the decoded text overlap a
    span; if what is left still holds a finding, every token is withheld."""
    text = _decode(tokenizer, ids)
    spans = _hits(text)
    if not spans:
        return text, set(), 0
    raw = text.encode("utf-8", "surrogatepass")
    shown = redact_bytes(raw, spans).decode("utf-8", "replace")
    prefixes = tokenizer.batch_decode([ids[: k + 1] for k in range(len(ids))],
                                      skip_special_tokens=False,
                                      clean_up_tokenization_spaces=False)  # fmt: skip
    ends = [len(p.encode("utf-8", "surrogatepass")) for p in prefixes]
    hidden: set[int] = set()
    for start, end, _rule in spans:
        first = next((k for k, e in enumerate(ends) if e > start), len(ids) - 1)
        last = next((k for k, e in enumerate(ends) if e >= end), len(ids) - 1)
        hidden.update(range(first, last + 1))
    runs: list[list[int]] = []
    run: list[int] = []
    for k, token in enumerate(ids):
        if k in hidden:
            runs.append(run)
            run = []
        else:
            run.append(token)
    runs.append(run)
    if any(_hits(_decode(tokenizer, r)) for r in runs if r):
        hidden = set(range(len(ids)))  # the tokens left still spell a finding: withhold all
    return shown, hidden, len(spans)
