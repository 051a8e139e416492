"""The draft: a stated value replaces a tool's default, a default never replaces a statement."""

from __future__ import annotations

from ftmanifest.authoring.draft import Draft

LOC = ("training", "grad_accum")


def test_a_stated_value_replaces_a_default_silently() -> None:
    draft = Draft()
    draft.put_default(LOC, 1, "transformers TrainingArguments", "training_args.py x")
    draft.put(LOC, 4, "args.json", "gradient_accumulation_steps")
    got = draft.values[LOC]
    assert (got.value, got.default, got.comment) == (
        4,
        False,
        "from args.json: gradient_accumulation_steps",
    )
    assert draft.notes == []  # a default is no statement to disagree with


def test_a_default_never_replaces_a_statement_or_another_default() -> None:
    draft = Draft()
    draft.put(LOC, 4, "a.yml", "gradient_accumulation_steps")
    draft.put_default(LOC, 1, "axolotl", "utils/schemas/training.py x")
    assert draft.values[LOC].value == 4
    other = ("seeds", "python")
    draft.put_default(other, 42, "axolotl", "seed")
    draft.put_default(other, 7, "trl", "seed")
    assert draft.values[other].comment == "default of axolotl seed"


def test_a_default_settles_a_fill() -> None:
    draft = Draft()
    draft.fill(LOC, "micro-batches per step")
    draft.put_default(LOC, 1, "transformers TrainingArguments", "training_args.py x")
    assert LOC not in draft.fills
