"""What preflight trains: the manifest's model, data and recipe as torch objects.

Layer: judging rooms - edge (loads the model, reads the data; torch, transformers and
peft are imported inside the functions).  ``default_recipe`` builds everything from the
manifest: the pinned model (``model.path`` or the pinned hub snapshot), its tokenizer,
the training split's records formatted as the model will see them, the method (full
fine-tuning with ``frozen_modules``, or LoRA with peft), the optimizer
(``training.optimizer``), and the step sizing (``seq_len``, ``micro_batch``,
``grad_accum``, ``loss_normalization``).

A team whose training code formats examples, builds the model or the
optimizer its own way hands preflight *that* code: ``--recipe FILE.py:FUNC``
names a function that takes the default ``Recipe`` and returns one with any
of ``format``, ``build_model``, ``make_optimizer``, ``save``/``load``
replaced, so the checks judge the code that will really run.

Formatting (the default ``format``): a chat record (``messages``) is its last
message as the completion and the ones before as the prompt, rendered with the
tokenizer's chat template when it has one, else joined by spaces; a
``prompt``/``completion`` record is those two fields; a ``text`` record is all
completion.  ``training.loss_on: completion`` puts loss (labels != -100) on
the completion's tokens only; ``all`` on every token but the first.  The
sequence is cut at ``seq_len``.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError, UsageError
from ftmanifest.manifest import LoadedManifest
from ftmanifest.manifest.model import Manifest
from ftmanifest.recordio import iter_records
from ftmanifest.seeding import seed_everything

IGNORE = -100  # the label of a position without loss (torch's cross-entropy ignore_index)


@dataclass
class Example:
    """One record as the model sees it."""

    input_ids: list[int]
    labels: list[int]
    prompt_len: int  # tokens before the completion (after truncation: may exceed the length)
    completion_len: int  # completion tokens before truncation
    category: str | None = None
    line: int | None = None

    @property
    def target_lost(self) -> bool:
        """The completion was cut off entirely by ``seq_len``."""
        return self.completion_len > 0 and self.prompt_len >= len(self.input_ids)


@dataclass
class Recipe:
    """Everything one training step needs, each part replaceable by ``--recipe``."""

    manifest: Manifest
    manifest_path: Path
    model_folder: Path
    tokenizer: Any
    records: list[tuple[int, Any]]  # (line, record) of the training split
    seq_len: int
    micro_batch: int
    grad_accum: int
    loss_normalization: str
    loss_on: str
    lr: float
    weight_decay: float
    precision: str = "fp32"
    checkpointing: bool = False
    format: Callable[[Any, Any, int, str], Example] = field(default=None)  # type: ignore[assignment]
    build_model: Callable[[Recipe], Any] = field(default=None)  # type: ignore[assignment]
    make_optimizer: Callable[[Any, Recipe], Any] = field(default=None)  # type: ignore[assignment]
    save: Callable[[Any, Any, Path], None] = field(default=None)  # type: ignore[assignment]
    load: Callable[[Path, Recipe], tuple[Any, Any]] = field(default=None)  # type: ignore[assignment]
    source: str = "manifest"  # or the --recipe FILE:FUNC that changed it

    def examples(self, limit: int | None = None) -> list[Example]:
        out = []
        for line, record in self.records[:limit]:
            ex = self.format(record, self.tokenizer, self.seq_len, self.loss_on)
            ex.line = line
            if ex.category is None and isinstance(record, dict):
                label = record.get("label", record.get("category"))
                ex.category = label if isinstance(label, str) else None
            out.append(ex)
        return out

    def expected_trainable(self, name: str) -> bool:
        """Is the parameter ``name`` (of the built model) meant to be trained?"""
        method = self.manifest.method
        if method is None or method.kind == "full":
            frozen = [] if method is None else method.frozen_modules
            return not any(_within(name, f) for f in frozen)
        if method.kind == "lora":
            if "lora_" in name:
                return True
            return any(f".{m}." in f".{name}." for m in method.modules_to_save) and (
                "modules_to_save" in name
            )
        return "lora_" in name or "prompt" in name  # other peft methods: their own params


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".") or f".{module}." in f".{name}"


# -- formatting ----------------------------------------------------------------


def default_format(record: Any, tokenizer: Any, seq_len: int, loss_on: str) -> Example:
    prompt, completion = _split(record)
    prompt_ids, completion_ids = _tokenize(tokenizer, prompt, completion)
    ids = prompt_ids + completion_ids
    if loss_on == "completion":
        labels = [IGNORE] * len(prompt_ids) + list(completion_ids)
    else:
        labels = [IGNORE] + ids[1:] if ids else []
    return Example(ids[:seq_len], labels[:seq_len], len(prompt_ids), len(completion_ids))


def _split(record: Any) -> tuple[Any, str]:
    """(prompt, completion): the prompt a list of chat messages or a string."""
    if isinstance(record, dict):
        messages = record.get("messages")
        if isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages):
            last = messages[-1]
            return messages[:-1], str(last.get("content", ""))
        if "prompt" in record and "completion" in record:
            return str(record["prompt"]), str(record["completion"])
        if isinstance(record.get("text"), str):
            return "", record["text"]
    if isinstance(record, str):
        return "", record
    raise InputError(
        "a training record preflight cannot format",
        field="data[train]",
        expected="chat messages, prompt/completion, or text",
        observed=json.dumps(record)[:80],
        hint="pass --recipe FILE.py:FUNC with the training code's own format function",
    )


def _tokenize(tokenizer: Any, prompt: Any, completion: str) -> tuple[list[int], list[int]]:
    if isinstance(prompt, list) and getattr(tokenizer, "chat_template", None):
        before = tokenizer.apply_chat_template(
            prompt, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        whole = tokenizer.apply_chat_template(
            [*prompt, {"role": "assistant", "content": completion}],
            tokenize=True,
            return_dict=False,
        )
        before, whole = list(before), list(whole)
        if whole[: len(before)] != before:
            raise InputError(
                "the chat template renders the prompt differently inside the conversation",
                field="tokenizer.chat_template",
                expected="the prompt's tokens as a prefix of the whole conversation's",
                observed="a different prefix",
                hint="pass --recipe with the training code's format function",
            )
        return before, whole[len(before) :]
    text = (
        " ".join(str(m.get("content", "")) for m in prompt) if isinstance(prompt, list) else prompt
    )
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    body = tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
    tail = tokenizer(completion, add_special_tokens=False)["input_ids"]
    return bos + list(body), list(tail) + eos


# -- model, optimizer, checkpoints ---------------------------------------------


def default_build_model(recipe: Recipe) -> Any:
    """A fresh model as the method says: frozen modules frozen, or a peft LoRA.
    The manifest's seeds are applied once the base is loaded, as ``load_pinned``
    does, so the LoRA's initial weights are the same in every process."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(recipe.model_folder, dtype="float32")
    seeds = recipe.manifest.seeds
    if seeds.python is not None or seeds.numpy is not None or seeds.torch is not None:
        seed_everything(recipe.manifest)
    if recipe.checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    method = recipe.manifest.method
    if method is not None and method.kind == "lora":
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(
            r=method.r,
            lora_alpha=method.alpha,  # peft says int; a float scales alike
            lora_dropout=method.dropout,
            target_modules=method.target_modules,
            modules_to_save=method.modules_to_save or None,
            bias=method.bias,
            use_rslora=method.use_rslora,
            use_dora=method.use_dora,
            task_type="CAUSAL_LM",
        )
        return get_peft_model(model, config)
    for name, param in model.named_parameters():
        param.requires_grad_(recipe.expected_trainable(name))
    return model


def default_make_optimizer(model: Any, recipe: Recipe) -> Any:
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)


def default_save(model: Any, optimizer: Any, folder: Path) -> None:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    trainable = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    torch.save({"model": trainable, "optimizer": optimizer.state_dict()}, folder / "state.pt")


def default_load(folder: Path, recipe: Recipe) -> tuple[Any, Any]:
    import torch

    state = torch.load(folder / "state.pt", weights_only=True)
    model = recipe.build_model(recipe)
    missing = set(state["model"]) - {n for n, _ in model.named_parameters()}
    if missing:
        raise InputError("the checkpoint names parameters the model does not have",
                         path=str(folder), observed=", ".join(sorted(missing)[:5]))  # fmt: skip
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in state["model"]:
                param.copy_(state["model"][name])
    optimizer = recipe.make_optimizer(model, recipe)
    optimizer.load_state_dict(state["optimizer"])
    return model, optimizer


# -- building ----------------------------------------------------------------


def model_folder(loaded: LoadedManifest, *, allow_outside: bool = False) -> Path:
    """The pinned model's folder here (a missing one is an error naming the fix)."""
    from ftmanifest.adapter.base import from_manifest

    base, _drift = from_manifest(loaded.manifest, Path(loaded.path), allow_outside=allow_outside)
    return Path(base.folder)


def train_records(loaded: LoadedManifest, limit: int = 2000) -> list[tuple[int, Any]]:
    entries = [d for d in loaded.manifest.data if d.role == "train"]
    if not entries:
        raise InputError(
            "the manifest has no training split",
            path=str(loaded.path),
            field="data",
            expected="a data entry with role: train",
            observed="none",
            hint="add the training data to `data` with role: train",
        )
    path = Path(loaded.path).parent / entries[0].path
    out = []
    for record in iter_records(path, entries[0].format):
        out.append((record.line, record.value))
        if len(out) >= limit:
            break
    return out


def default_recipe(loaded: LoadedManifest, *, allow_outside: bool = False) -> Recipe:
    from transformers import AutoTokenizer

    m = loaded.manifest
    t = m.training
    folder = model_folder(loaded, allow_outside=allow_outside)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    optimizer = t.optimizer
    return Recipe(
        manifest=m,
        manifest_path=Path(loaded.path),
        model_folder=folder,
        tokenizer=tokenizer,
        records=train_records(loaded),
        seq_len=t.seq_len or 512,
        micro_batch=t.micro_batch or 1,
        grad_accum=t.grad_accum or 1,
        loss_normalization=t.loss_normalization or "per-token",
        loss_on=t.loss_on or "all",
        lr=optimizer.lr if optimizer else 1e-4,
        weight_decay=optimizer.weight_decay if optimizer else 0.0,
        precision=t.precision or "fp32",
        checkpointing=t.activation_checkpointing,
        format=default_format,
        build_model=default_build_model,
        make_optimizer=default_make_optimizer,
        save=default_save,
        load=default_load,
    )


def apply_hook(recipe: Recipe, spec: str | None) -> Recipe:
    """``FILE.py:FUNC``: the training code's own recipe (its function gets the
    default recipe and returns the one to judge)."""
    if not spec:
        return recipe
    path_text, sep, func = spec.rpartition(":")
    if not sep or not path_text or not func.isidentifier():
        raise UsageError("--recipe takes FILE.py:FUNCTION", field="--recipe",
                         expected="train_recipe.py:recipe", observed=spec)  # fmt: skip
    path = Path(path_text)
    if not path.is_file():
        raise InputError("the recipe file does not exist", path=str(path), field="--recipe",
                         hint="name the Python file of the training code")  # fmt: skip
    loaded_spec = importlib.util.spec_from_file_location(f"ftmanifest_recipe_{path.stem}", path)
    if loaded_spec is None or loaded_spec.loader is None:
        raise InputError("cannot import the recipe file", path=str(path), field="--recipe")
    module = importlib.util.module_from_spec(loaded_spec)
    loaded_spec.loader.exec_module(module)
    hook = getattr(module, func, None)
    if not callable(hook):
        raise InputError(f"{func} is not a function of the recipe file", path=str(path),
                         field="--recipe", observed=func)  # fmt: skip
    result = hook(recipe)
    if not isinstance(result, Recipe):
        raise InputError(f"{func} did not return a Recipe", path=str(path), field="--recipe",
                         expected="ftmanifest.preflight.recipe.Recipe",
                         observed=type(result).__name__)  # fmt: skip
    return replace(result, source=spec)
