"""A record as TRL's ``SFTTrainer`` prepares it, token for token (``data sample``).

Layer: judging rooms - data (pure given a tokenizer: no trl import, nothing read or
printed).  ``training.objective.kind: sft`` says the run trains with TRL's
``SFTTrainer``; its preparation is not preflight's (``preflight.recipe``), so ``data
sample`` shows this one.  It follows ``SFTTrainer._prepare_dataset`` of trl 1.x with the
configuration ``sft_config`` builds from the manifest (no packing,
``completion_only_loss`` from ``loss_on``, no ``assistant_only_loss``, truncation
keeping the start at ``seq_len``):

- ``prompt``/``completion`` strings: the EOS token's text is appended to the
  completion unless it ends with it, then ``prompt`` and ``prompt +
  completion`` are tokenized with the tokenizer's own special tokens (a
  tokenizer that appends EOS itself ends with two); the completion starts
  where the two token lists diverge, and carries the loss under ``loss_on:
  completion``;
- ``prompt``/``completion`` message lists: the chat template, the prompt with
  the generation prompt;
- ``messages``: the chat template over the whole conversation, loss on every
  token (TRL's completion-only loss does not apply to it);
- ``text``: the text plus the EOS text, loss on every token.

Labels equal the ids wherever loss is carried (the model shifts them), so the
loss-token count is TRL's ``labels != -100``.  What this does not reproduce
(a ``formatting_func``, ``SFTConfig.chat_template_path``, ``eos_token``,
``assistant_only_loss``, packing, ``conversations`` records) is refused by the
guard's comparison or shown only by ``data sample --from-run``.
"""

from __future__ import annotations

import json
from typing import Any

from ftmanifest.errors import InputError
from ftmanifest.preflight.recipe import IGNORE, Example


def _chat(tokenizer: Any, messages: list[Any], record: dict[str, Any], **kw: Any) -> list[int]:
    tools = record.get("tools")
    tools = json.loads(tools) if isinstance(tools, str) else tools
    extra = record.get("chat_template_kwargs") or {}
    out = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, tools=tools,
                                        **extra, **kw)  # fmt: skip
    return list(out["input_ids"])


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _eos(text: str, tokenizer: Any) -> str:
    eos = tokenizer.eos_token
    return text if not eos or text.endswith(eos) else text + eos


def sft_format(record: Any, tokenizer: Any, seq_len: int, loss_on: str) -> Example:
    """``record`` as ``SFTTrainer`` feeds it: ids, labels (``-100``: no loss), prompt length."""
    if not isinstance(record, dict):
        record = {"text": record} if isinstance(record, str) else {}
    if "prompt" in record and "completion" in record:
        prompt, completion = record["prompt"], record["completion"]
        if isinstance(prompt, list) and isinstance(completion, list):
            prompt_ids = _chat(tokenizer, prompt, record, add_generation_prompt=True)
            ids = _chat(tokenizer, prompt + completion, record)
        else:
            prompt_ids = list(tokenizer(str(prompt))["input_ids"])
            ids = list(tokenizer(str(prompt) + _eos(str(completion), tokenizer))["input_ids"])
        cut = _common(prompt_ids, ids)
        completion_only = loss_on == "completion"
        labels = [IGNORE if completion_only and i < cut else t for i, t in enumerate(ids)]
    elif isinstance(record.get("messages"), list):
        messages = record["messages"]
        ids = _chat(tokenizer, messages, record)
        head = _chat(tokenizer, messages[:-1], record, add_generation_prompt=True)
        cut, labels = _common(head, ids), list(ids)
    elif isinstance(record.get("text"), str):
        ids = list(tokenizer(_eos(record["text"], tokenizer))["input_ids"])
        cut, labels = 0, list(ids)
    else:
        raise InputError(
            "a training record TRL's SFTTrainer formatting cannot be reproduced for",
            field="data[train]",
            expected="prompt/completion, messages or text",
            observed=json.dumps(record)[:80] if record else "not a JSON object",
            hint="ftmanifest data sample --from-run RUN shows what the trainer really fed",
        )
    return Example(ids[:seq_len], labels[:seq_len], cut, len(ids) - cut)
