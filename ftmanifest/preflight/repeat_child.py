"""A fresh process of the determinism check: the first steps from scrambled generators.

Layer: judging rooms - edge.  ``python -m ftmanifest.preflight.repeat_child MANIFEST
RECIPE DEVICE STEPS``: sets every random generator from the operating system
(``repeat.scramble``), builds the recipe (``RECIPE`` is ``manifest`` or the ``--recipe``
spec) and runs its first ``STEPS`` steps (``repeat.first_steps``: the recipe's own model
building applies the manifest's seeds, or does not), then prints the run as one JSON
line.
"""

from __future__ import annotations

import json
import sys

from ftmanifest.collector import tune_collector
from ftmanifest.manifest import load_manifest
from ftmanifest.preflight.recipe import apply_hook, default_recipe
from ftmanifest.preflight.repeat import first_steps, scramble


def main(argv: list[str]) -> int:
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    manifest, spec, device_name, steps = argv
    scramble()
    loaded = load_manifest(manifest)
    recipe = default_recipe(loaded, allow_outside=True)
    recipe = apply_hook(recipe, None if spec == "manifest" else spec)
    run = first_steps(recipe, torch.device(device_name), int(steps))
    print(json.dumps(run.to_dict()))
    return 0


if __name__ == "__main__":
    tune_collector()
    sys.exit(main(sys.argv[1:]))
