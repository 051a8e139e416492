"""Train the tiny example for a few steps on the CPU, guarded by its manifest.

Used by `make demo`: the Trainer refuses to start (exit 1) when the manifest
and this machine, model or data disagree.  Usage: python train_tiny.py MANIFEST
"""

from __future__ import annotations

import sys
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

import ftmanifest
from ftmanifest.errors import FtManifestError
from ftmanifest.integrations.example import lm_examples
from ftmanifest.integrations.transformers import FtManifestCallback


def main(manifest: Path) -> int:
    ftmanifest.seed_everything(manifest)
    folder = manifest.parent
    tok = AutoTokenizer.from_pretrained(folder / "model")
    model = AutoModelForCausalLM.from_pretrained(folder / "model")
    args = TrainingArguments(
        output_dir=str(folder / "out"),
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        logging_strategy="no",
    )
    data = lm_examples(folder / "data" / "train.jsonl", tok, seq_len=24)
    guard = FtManifestCallback(manifest)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[guard])
    try:
        trainer.train()
    except FtManifestError as exc:
        print(f"training refused:\n{exc.render()}", file=sys.stderr)
        return exc.exit_code
    print(f"trained {trainer.state.global_step} steps; run record in {folder / 'out'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
