"""Demo and test support: the tiny offline example project.

Layer: commands (demo and test support; not imported by the tool's commands).
``tiny`` builds the data set, tokenizer and model; ``project`` writes them out
with a lock file and a manifest; ``training`` wraps them in a real Trainer.
torch, transformers and tokenizers are imported inside the functions only.
"""

from __future__ import annotations

from ftmanifest.examples.project import build_example, write_lock_file
from ftmanifest.examples.tiny import (
    DEPARTMENTS,
    build_dataset,
    build_model,
    build_tokenizer,
    default_corpus,
    lm_examples,
    read_texts,
)
from ftmanifest.examples.training import tiny_trainer

__all__ = [
    "DEPARTMENTS",
    "build_dataset",
    "build_example",
    "build_model",
    "build_tokenizer",
    "default_corpus",
    "lm_examples",
    "read_texts",
    "tiny_trainer",
    "write_lock_file",
]
