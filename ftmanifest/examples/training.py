"""A real ``transformers.Trainer`` on the tiny example, on the CPU.

Layer: commands - examples (demo and test support; not imported by the tool's commands).
transformers is imported inside the function only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.examples.tiny import lm_examples
from ftmanifest.integrations.builders import manifest_model, training_arguments


def tiny_trainer(
    folder: Path,
    out: Path,
    callbacks: list[Any],
    *,
    manifest: Path | None = None,
    model: Any = None,
    tokenizer: Any = None,
    args: Any = None,
    eval_dataset: Any = None,
    **overrides: Any,
) -> Any:
    """A real ``transformers.Trainer`` for the example in ``folder``, on the CPU.

    The arguments come from the manifest (``training_arguments``; ``manifest``
    defaults to ``folder/manifest.yaml``), ``overrides`` are passed on to it
    (a value the manifest pins is refused there); ``args`` replaces them with
    arguments of the caller's own (what the guard must judge); ``eval_dataset``
    is handed to the Trainer as it is.  ``model``/``tokenizer``
    default to loading ``folder/model`` (pass the pair ``load_pinned``
    returns, or any other model, to train that one instead).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

    manifest = manifest or folder / "manifest.yaml"
    tok: Any = tokenizer or AutoTokenizer.from_pretrained(folder / "model")
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(folder / "model")
    options: dict[str, Any] = {
        "output_dir": str(out),
        "use_cpu": True,
        "report_to": [],
        "save_strategy": "no",
        "disable_tqdm": True,
        "logging_strategy": "no",
        **overrides,
    }
    args = args if args is not None else training_arguments(manifest, **options)
    training = manifest_model(manifest).training
    data = lm_examples(
        folder / "data" / "train.jsonl",
        tok,
        seq_len=training.seq_len or 24,
        loss_on=training.loss_on or "completion",
    )
    return Trainer(
        model=model, args=args, train_dataset=data, eval_dataset=eval_dataset, callbacks=callbacks
    )


def own_arguments(manifest: Path, out: Path, **changes: Any) -> Any:
    """``TrainingArguments`` a script builds itself: the manifest's values with ``changes``
    (what the guard must catch; the builders would refuse the changes)."""
    from transformers import TrainingArguments

    quiet = {"report_to": [], "save_strategy": "no", "disable_tqdm": True, "logging_strategy": "no"}
    data = training_arguments(manifest, output_dir=str(out), use_cpu=True, **quiet).to_dict()
    init = {k for k, f in TrainingArguments.__dataclass_fields__.items() if f.init}
    data = {k: v for k, v in data.items() if k in init and not k.endswith("_token")}
    return TrainingArguments(**{**data, **changes})
