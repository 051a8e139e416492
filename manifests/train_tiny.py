"""Train the tiny example for a few steps on the CPU, guarded by its manifest.

Used by `make demo`: the Trainer refuses to start (exit 1) when the manifest
and this machine, model or data disagree, or when the model it is handed is not
the pinned one, or when the recipe it runs is not the manifest's.
Usage: python train_tiny.py MANIFEST [--model-from FOLDER] [--own-args K=V,...]

The model is loaded with ``load_pinned`` (exactly the pinned snapshot, the
revision read from the manifest); ``--model-from`` loads another folder
instead, which the guard refuses.  The arguments are built from the manifest
(``training_arguments``); ``--own-args seed=42,per_device_train_batch_size=8``
builds them as a script of its own would, with those values, which the guard
refuses before the first step, naming each manifest field.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import ftmanifest
from ftmanifest.errors import FtManifestError
from ftmanifest.examples.training import own_arguments, tiny_trainer
from ftmanifest.integrations.transformers import FtManifestCallback, load_pinned
from ftmanifest.output import error_text


def main(manifest: Path, model_from: Path | None = None, own: str | None = None) -> int:
    ftmanifest.seed_everything(manifest)
    folder = manifest.parent
    try:
        if model_from is None:
            model, tokenizer = load_pinned(manifest)
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            model = AutoModelForCausalLM.from_pretrained(model_from)
            tokenizer = AutoTokenizer.from_pretrained(model_from)
        args = None
        if own:
            changes = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in own.split(","))}
            args = own_arguments(manifest, folder / "out", **changes)
        trainer = tiny_trainer(
            folder,
            folder / "out",
            [FtManifestCallback(manifest)],
            model=model,
            tokenizer=tokenizer,
            args=args,
        )
        trainer.train()
    except FtManifestError as exc:
        print(f"training refused:\n{error_text(exc)}", file=sys.stderr)
        return exc.exit_code
    print(f"trained {trainer.state.global_step} steps; run record in {folder / 'out'}")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    other = Path(args[args.index("--model-from") + 1]) if "--model-from" in args else None
    own = args[args.index("--own-args") + 1] if "--own-args" in args else None
    sys.exit(main(Path(args[0]), other, own))
