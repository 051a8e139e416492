"""A real ``transformers.Trainer`` on the tiny example, on the CPU.

Layer: examples (demo and test support; not imported by the tool's commands).
transformers is imported inside the function only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.examples.tiny import lm_examples


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
