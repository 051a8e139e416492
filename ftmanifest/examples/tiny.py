"""The tiny, real, offline example: routing data, a tokenizer and a model.

Layer: commands - examples (demo and test support; not imported by the tool's commands).
A chat-format JSONL data set of support documents routed to five departments,
a word-level tokenizer trained with ``tokenizers``, and a 2-layer Llama or
GPT-2 built from a config and saved with safetensors.  torch, transformers and
tokenizers are imported inside the functions only.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ftmanifest.errors import UsageError
from ftmanifest.fsutil import atomic_write_text

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

DEPARTMENTS = ("billing", "shipping", "returns", "technical", "account")
SYSTEM_PROMPT = "Route the document to one department: " + ", ".join(DEPARTMENTS) + "."
SPECIAL_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")

_SUBJECTS: Mapping[str, tuple[str, ...]] = {
    "billing": ("my invoice", "the last charge", "a double payment", "the monthly bill"),
    "shipping": ("my parcel", "the delivery", "the courier", "the tracking number"),
    "returns": ("the refund", "a return label", "the broken item", "an exchange"),
    "technical": ("the app", "the login page", "the firmware update", "the router"),
    "account": ("my password", "my email address", "the account settings", "my profile"),
}
_PROBLEMS: Mapping[str, tuple[str, ...]] = {
    "billing": ("is wrong", "was charged twice", "shows the wrong amount", "is missing"),
    "shipping": ("is late", "never arrived", "went to the wrong address", "is lost"),
    "returns": ("has not arrived", "was refused", "is not working", "takes too long"),
    "technical": ("crashes", "shows an error", "does not load", "keeps restarting"),
    "account": ("cannot be changed", "is locked", "was reset", "is not accepted"),
}
_OPENERS = ("hello ,", "hi ,", "good morning ,", "dear support ,", "")
_CLOSERS = ("please help .", "thanks .", "what can i do ?", "please fix it .", "")


def _document(rng: random.Random, label: str) -> str:
    words = [
        rng.choice(_OPENERS),
        rng.choice(_SUBJECTS[label]),
        rng.choice(_PROBLEMS[label]),
        ".",
        rng.choice(_CLOSERS),
    ]
    return " ".join(w for w in words if w)


def _record(rng: random.Random, label: str) -> dict[str, object]:
    return {
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": _document(rng, label)},
            {"role": "assistant", "content": label},
        ],
        "label": label,
    }


def _jsonl(records: Iterable[Mapping[str, object]]) -> str:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)


def build_dataset(
    folder: Path, *, seed: int = 0, n_train: int = 64, n_eval: int = 16, n_test: int = 16
) -> dict[str, Path]:
    """Write ``train/eval/test.jsonl`` (chat format, 5 departments) into ``folder``.

    The same seed gives the same bytes.  Labels cycle through the departments
    so every split holds every category.  Returns {split name -> file}.
    """
    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for split, count in (("train", n_train), ("eval", n_eval), ("test", n_test)):
        if count < 0:
            raise UsageError(f"n_{split} must be >= 0", field=f"n_{split}", observed=str(count))
        labels = [DEPARTMENTS[i % len(DEPARTMENTS)] for i in range(count)]
        rng.shuffle(labels)
        path = folder / f"{split}.jsonl"
        atomic_write_text(path, _jsonl(_record(rng, label) for label in labels))
        out[split] = path
    return out


def read_texts(path: Path) -> list[str]:
    """Every message text of a chat JSONL file, in order (the tokenizer corpus)."""
    texts: list[str] = []
    for line in Path(path).read_text("utf-8").splitlines():
        if line.strip():
            texts.extend(m["content"] for m in json.loads(line)["messages"])
    return texts


def lm_examples(
    path: Path,
    tokenizer: PreTrainedTokenizerFast,
    *,
    seq_len: int = 32,
    loss_on: Literal["completion", "all"] = "completion",
) -> list[dict[str, list[int]]]:
    """Causal-LM rows ``document label`` from a chat JSONL file, padded to ``seq_len``.

    ``loss_on="completion"`` (the example manifest's ``training.loss_on``)
    puts loss on the label and the end token only: the document's positions
    are labelled -100, as the Trainer guard checks on the first batch; ``all``
    on every real token.  Padding is always -100.
    """
    rows: list[dict[str, list[int]]] = []
    pad = tokenizer.pad_token_id
    for line in Path(path).read_text("utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        document = record["messages"][1]["content"]
        ids = tokenizer(f"{document} {record['label']}", truncation=True, max_length=seq_len)[
            "input_ids"
        ]
        n = len(ids)
        labels = list(ids)
        if loss_on == "completion":  # the prompt is the document, without its end token
            prompt = len(tokenizer(document)["input_ids"]) - 1
            labels = [-100] * min(prompt, n) + ids[prompt:]
        rows.append({
            "input_ids": ids + [pad] * (seq_len - n),
            "attention_mask": [1] * n + [0] * (seq_len - n),
            "labels": labels + [-100] * (seq_len - n),
        })  # fmt: skip
    return rows


def default_corpus(seed: int = 0) -> list[str]:
    """A corpus that covers every word the example data can contain."""
    texts = [SYSTEM_PROMPT, *DEPARTMENTS, *_OPENERS, *_CLOSERS]
    for label in DEPARTMENTS:
        texts.extend(_SUBJECTS[label])
        texts.extend(_PROBLEMS[label])
    rng = random.Random(seed)
    texts.extend(_document(rng, DEPARTMENTS[i % 5]) for i in range(50))
    return [t for t in texts if t]


def build_tokenizer(
    folder: Path, corpus_texts: Iterable[str], *, vocab_size: int = 300
) -> PreTrainedTokenizerFast:
    """Train a word-level tokenizer on ``corpus_texts`` and save it into ``folder``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    pad, unk, bos, eos = SPECIAL_TOKENS
    tok = Tokenizer(models.WordLevel(unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(
        vocab_size=vocab_size, min_frequency=1, special_tokens=list(SPECIAL_TOKENS)
    )
    tok.train_from_iterator(list(corpus_texts), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        special_tokens=[(bos, tok.token_to_id(bos)), (eos, tok.token_to_id(eos))],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=pad, unk_token=unk, bos_token=bos, eos_token=eos
    )
    fast.save_pretrained(str(folder))
    return fast


def build_model(
    folder: Path,
    *,
    arch: Literal["llama", "gpt2"] = "llama",
    seed: int = 0,
    corpus: Iterable[str] | None = None,
) -> Path:
    """Save a 2-layer model and its tokenizer into ``folder`` (safetensors).

    The tokenizer is trained on ``corpus`` (default: ``default_corpus(seed)``)
    and the vocabulary size follows it.  Weights come from ``seed`` inside a
    forked RNG, so the caller's torch RNG state is left untouched; on one
    machine the same seed gives the same bytes.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if arch not in ("llama", "gpt2"):
        raise UsageError(
            f"unknown example architecture {arch!r}",
            field="arch",
            expected="llama or gpt2",
            observed=str(arch),
        )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(folder, corpus if corpus is not None else default_corpus(seed))
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
           "pad_token_id": tok.pad_token_id}  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if arch == "llama":
            model: PreTrainedModel = LlamaForCausalLM(LlamaConfig(
                vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                max_position_embeddings=64, tie_word_embeddings=False, **ids,
            ))  # fmt: skip
        else:
            model = GPT2LMHeadModel(GPT2Config(
                vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=64, **ids
            ))  # fmt: skip
    model.save_pretrained(str(folder), safe_serialization=True)
    return folder
