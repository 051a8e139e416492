"""Train the tiny example for a few steps on the CPU, guarded by its manifest.

Used by `make demo`: the Trainer refuses to start (exit 1) when the manifest
and this machine, model or data disagree.  Usage: python train_tiny.py MANIFEST
"""

from __future__ import annotations

import sys
from pathlib import Path

import ftmanifest
from ftmanifest.errors import FtManifestError
from ftmanifest.integrations.example import tiny_trainer
from ftmanifest.integrations.transformers import FtManifestCallback


def main(manifest: Path) -> int:
    ftmanifest.seed_everything(manifest)
    folder = manifest.parent
    trainer = tiny_trainer(folder, folder / "out", [FtManifestCallback(manifest)])
    try:
        trainer.train()
    except FtManifestError as exc:
        print(f"training refused:\n{exc.render()}", file=sys.stderr)
        return exc.exit_code
    print(f"trained {trainer.state.global_step} steps; run record in {folder / 'out'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
