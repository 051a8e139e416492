"""A tiny, real, offline example: routing data, a tokenizer, a model, a hub cache.

Layer: edge (integrations).  The demo and the tests use these builders so that
every check runs on real files: a chat-format JSONL data set, a tokenizer
trained with ``tokenizers``, a 2-layer Llama or GPT-2 built from a config and
saved with safetensors, and a Hugging Face hub cache laid out on disk exactly
as huggingface_hub lays it out.  torch, transformers and tokenizers are
imported inside the functions only.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ftmanifest.errors import InputError, UsageError
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

_SIZE_PREFIXES = ("model.safetensors", "pytorch_model", "tf_model", "flax_model")


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
    path: Path, tokenizer: PreTrainedTokenizerFast, *, seq_len: int = 32
) -> list[dict[str, list[int]]]:
    """Causal-LM rows ``document label`` from a chat JSONL file, padded to ``seq_len``.

    Loss is on every real token (padding is -100), enough for a smoke run.
    """
    rows: list[dict[str, list[int]]] = []
    pad = tokenizer.pad_token_id
    for line in Path(path).read_text("utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        text = f"{record['messages'][1]['content']} {record['label']}"
        ids = tokenizer(text, truncation=True, max_length=seq_len)["input_ids"]
        n = len(ids)
        rows.append({
            "input_ids": ids + [pad] * (seq_len - n),
            "attention_mask": [1] * n + [0] * (seq_len - n),
            "labels": ids + [-100] * (seq_len - n),
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


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob: the etag the hub serves for non-LFS files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def hub_etag(relpath: str, data: bytes) -> str:
    """sha256 for LFS-stored weight files, git blob sha1 for the small ones."""
    name = relpath.rsplit("/", 1)[-1]
    if name.startswith(_SIZE_PREFIXES) or name.endswith((".safetensors", ".bin", ".pt", ".gguf")):
        return hashlib.sha256(data).hexdigest()
    return git_blob_sha1(data)


def commit_id(files: Mapping[str, bytes], revision: str) -> str:
    """A deterministic 40-hex commit id over a snapshot's files and its name."""
    h = hashlib.sha1(f"ftmanifest-example\0{revision}\0".encode())
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return h.hexdigest()


def _snapshot_files(source: Path) -> dict[str, bytes]:
    if not source.is_dir():
        raise InputError("a snapshot source must be a folder", path=str(source))
    return {
        p.relative_to(source).as_posix(): p.read_bytes()
        for p in sorted(source.rglob("*"))
        if p.is_file()
    }


def build_hub_cache(
    cache_dir: Path,
    repo_id: str,
    snapshots: Mapping[str, Path],
    refs: Mapping[str, str],
) -> dict[str, str]:
    """Lay out ``repo_id`` in a hub cache, one snapshot per entry of ``snapshots``.

    ``snapshots`` maps a revision name (``"v1"``, ``"main"``) to a model folder;
    each becomes ``snapshots/<commit>/`` whose files are relative symlinks into
    ``../../blobs/<etag>`` (blobs shared between commits when equal), as
    huggingface_hub's ``_create_symlink`` writes them.  ``refs`` maps a branch
    name to a revision name of ``snapshots`` (or a 40-hex commit) and is
    written to ``refs/<branch>``.  Returns {revision name -> commit}, refs
    included.
    """
    if repo_id.count("/") != 1:
        raise UsageError("a hub repo id is 'org/name'", field="repo_id", observed=repo_id)
    repo = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    blobs = repo / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    commits: dict[str, str] = {}
    for revision, source in snapshots.items():
        files = _snapshot_files(Path(source))
        commit = commit_id(files, revision)
        snap = repo / "snapshots" / commit
        if snap.exists():
            shutil.rmtree(snap)
        for rel, data in files.items():
            blob = blobs / hub_etag(rel, data)
            if not blob.exists():
                blob.write_bytes(data)
            link = snap / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.relpath(blob, link.parent), link)
        commits[revision] = commit
    for branch, target in refs.items():
        commit = commits.get(target, target)
        if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
            raise UsageError(
                f"ref {branch!r} points at neither a snapshot nor a commit",
                field=f"refs.{branch}",
                expected="a key of snapshots or a 40-hex commit",
                observed=target,
            )
        ref = repo / "refs" / branch
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)  # no newline, as huggingface_hub writes it
        commits[branch] = commit
    return commits


_MANIFEST = """\
# Tiny offline example: route support documents to one of five departments.
# `ftmanifest lock` fills in the pins (environment, digests, record counts).
ftmanifest: 1

experiment:
  id: {experiment_id}
  task: classification
  hypothesis: >-
    Full fine-tuning of a 2-layer {arch} routes the example documents better
    than the untrained model.
  owner: example@example.org
  guards:
    - kind: per_category
      metric: f1
      split: eval
      max_drop: 0.05

model:
  path: {model_dir}
  license: apache-2.0
  terms_accepted: true

seeds:
  python: {seed}
  numpy: {seed}
  torch: {seed}
  data_order: {seed}
  deterministic: true
  cudnn_benchmark: false

data:
  - name: train
    role: train
    path: {data_dir}/train.jsonl
    format: jsonl
    license: synthetic
    contains_personal_data: false
  - name: eval
    role: eval
    path: {data_dir}/eval.jsonl
    format: jsonl
    license: synthetic
    contains_personal_data: false
  - name: test
    role: test
    sealed: true
    path: {data_dir}/test.jsonl
    format: jsonl
    license: synthetic
    contains_personal_data: false

method:
  kind: full

environment:
  lock:
    path: requirements.lock

security:
  scan:
    on: [verify, audit]

training:
  seq_len: 32
  micro_batch: 4
  grad_accum: 1
  loss_normalization: per-token
  precision: fp32
  max_steps: 3
"""

LOCKED_PACKAGES = ("torch", "transformers", "tokenizers", "safetensors", "numpy", "ftmanifest")


def write_lock_file(path: Path) -> Path:
    """A pip-style lock of the packages the example needs, as installed here."""
    from importlib.metadata import PackageNotFoundError, version

    lines = []
    for name in LOCKED_PACKAGES:
        try:
            lines.append(f"{name}=={version(name)}\n")
        except PackageNotFoundError:
            continue
    atomic_write_text(path, "".join(lines))
    return path


def build_example(
    folder: Path,
    *,
    arch: Literal["llama", "gpt2"] = "llama",
    seed: int = 0,
    experiment_id: str = "docroute-tiny",
) -> Path:
    """Data in ``folder/data``, model in ``folder/model``, and an unlocked manifest.

    Returns the manifest path (``folder/manifest.yaml``); run ``ftmanifest
    lock`` on it to pin it to this machine.
    """
    folder = Path(folder)
    build_dataset(folder / "data", seed=seed)
    build_model(folder / "model", arch=arch, seed=seed)
    write_lock_file(folder / "requirements.lock")
    manifest = folder / "manifest.yaml"
    atomic_write_text(
        manifest,
        _MANIFEST.format(
            experiment_id=experiment_id, arch=arch, model_dir="model", data_dir="data", seed=seed
        ),  # fmt: skip
    )
    return manifest


def tiny_trainer(
    folder: Path,
    out: Path,
    callbacks: list[Any],
    *,
    max_steps: int = 3,
    model: Any = None,
    tokenizer: Any = None,
) -> Any:
    """A real ``transformers.Trainer`` for the example in ``folder``, on the CPU.

    ``model``/``tokenizer`` default to loading ``folder/model`` (pass the pair
    ``load_pinned`` returns, or any other model, to train that one instead).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    tok: Any = tokenizer or AutoTokenizer.from_pretrained(folder / "model")
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(folder / "model")
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=max_steps,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        logging_strategy="no",
    )
    data = lm_examples(folder / "data" / "train.jsonl", tok, seq_len=24)
    return Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)
