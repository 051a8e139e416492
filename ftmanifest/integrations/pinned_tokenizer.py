"""The tokenizer handed to the Trainer, against the one the pinned snapshot's files build.

Layer: edges - edge (integrations; transformers imported inside the functions).  The
pinned ``tokenizer.json``, ``tokenizer_config.json`` and chat template verify
byte for byte, and a script can still assign ``tokenizer.chat_template`` or
``tokenizer.pad_token = tokenizer.eos_token`` after loading: another prompt
format, other positions masked out of the loss.  ``judge_tokenizer`` loads
the pinned snapshot's tokenizer with the same class (offline) and compares
what changes the tokens a model is trained on: the chat template, each
special token and its id, the special and added tokens, the vocabulary.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.location import Loc

RULE = "drift.tokenizer"
HINT = (
    "train with the tokenizer load_pinned(MANIFEST) returns, unchanged; to train with "
    "another template or other special tokens, save that tokenizer into the model "
    "snapshot and re-lock, or accept the row with a reason"
)
SPECIAL = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
           "mask_token")  # fmt: skip


def _digest(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _template(value: Any) -> str:
    if not value:
        return "none"
    size = len(value) if isinstance(value, str) else sum(len(str(v)) for v in value.values())
    return f"{_digest(value)[:19]}... ({size} characters)"


def tokenizer_facts(processing_class: Any) -> dict[str, str]:
    """``{fact: shown value}`` of what changes the tokens (a processor: its tokenizer's,
    and its own chat template)."""
    tok = getattr(processing_class, "tokenizer", None) or processing_class
    facts = {"chat_template": _template(getattr(processing_class, "chat_template", None))}
    for name in SPECIAL:
        token, token_id = getattr(tok, name, None), getattr(tok, name + "_id", None)
        facts[name] = "none" if token is None else f"{token} (id {token_id})"
    facts["special_tokens"] = ", ".join(sorted(map(str, getattr(tok, "all_special_tokens", []))))
    added = getattr(tok, "added_tokens_decoder", None) or {}
    facts["added_tokens"] = (
        f"{len(added)} tokens, "
        + _digest(
            sorted((int(i), str(t), bool(getattr(t, "special", False))) for i, t in added.items())
        )[:19]
    )
    vocab = tok.get_vocab() if hasattr(tok, "get_vocab") else {}
    facts["vocabulary"] = f"{len(vocab)} tokens, {_digest(sorted(vocab.items()))[:19]}"
    return facts


def judge_tokenizer(processing_class: Any, folder: Path, path: str) -> list[Finding]:
    """One row per fact of ``processing_class`` that is not the pinned tokenizer's."""
    try:
        pinned = type(processing_class).from_pretrained(str(folder), local_files_only=True)
        want = tokenizer_facts(pinned)
        seen = tokenizer_facts(processing_class)
    except Exception as exc:  # noqa: BLE001 - what cannot be compared is refused, never passed
        return [_row(path, ("model", "tokenizer"), "the tokenizer handed to the Trainer cannot "
                     "be compared with the pinned snapshot's",
                     f"{type(processing_class).__name__} loadable from the pinned files",
                     f"{type(exc).__name__}: {exc}"[:300])]  # fmt: skip
    return [
        _row(path, ("model", "tokenizer", key),
             f"the tokenizer's {key} is not the pinned snapshot's", want[key], seen[key])
        for key in want
        if seen.get(key) != want[key]
    ]  # fmt: skip


def _row(path: str, loc: Loc, message: str, expected: str, observed: str) -> Finding:
    return Finding.at(loc, kind="drift", rule=RULE, message=message, path=path,
                      expected=expected, observed=observed, hint=HINT)  # fmt: skip
