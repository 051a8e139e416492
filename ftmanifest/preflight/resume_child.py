"""The new process of the resume check: load the checkpoint, resume, generate.

Layer: judging rooms - edge.  ``python -m ftmanifest.preflight.resume_child MANIFEST
CHECKPOINT RECIPE DEVICE``: builds the same recipe (``RECIPE`` is ``manifest`` or the
``--recipe`` spec), loads the checkpoint with the recipe's ``load``, generates from the
first example's prompt, then runs two steps on the same batches with the manifest's
seeds, and prints one JSON line: the generated tokens, both losses, the trainable
parameters' digest and how many optimizer state tensors were restored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ftmanifest.collector import tune_collector
from ftmanifest.manifest import load_manifest
from ftmanifest.preflight.recipe import apply_hook, default_recipe
from ftmanifest.preflight.steps import micro_batches, pad_id, train_step
from ftmanifest.preflight.train_checks import greedy, trainable_digest
from ftmanifest.seeding import seed_everything


def main(argv: list[str]) -> int:
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    manifest, checkpoint, spec, device_name = argv
    loaded = load_manifest(manifest)
    seed_everything(loaded)
    recipe = default_recipe(loaded, allow_outside=True)
    recipe = apply_hook(recipe, None if spec == "manifest" else spec)
    device = torch.device(device_name)
    examples = recipe.examples(limit=256)
    model, optimizer = recipe.load(Path(checkpoint), recipe)
    model = model.to(device)
    generated = greedy(model, recipe.tokenizer, examples[0], device)
    batches = micro_batches(examples, recipe.micro_batch, recipe.grad_accum,
                            pad_id(recipe.tokenizer), device)  # fmt: skip
    seed_everything(loaded)
    losses = [
        train_step(model, optimizer, batches, recipe.loss_normalization, recipe.precision)
        for _ in range(2)
    ]
    state = sum(len(v) for v in optimizer.state_dict()["state"].values())
    print(json.dumps({"generated": generated, "losses": losses,
                      "digest": trainable_digest(model), "state_tensors": state}))  # fmt: skip
    return 0


if __name__ == "__main__":
    tune_collector()
    sys.exit(main(sys.argv[1:]))
