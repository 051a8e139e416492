"""Benchmark ``ftmanifest preflight`` on the tiny example, against one bare training step.

  .venv/bin/python benchmarks/bench_preflight.py [--arch llama|gpt2]

Builds the tiny example (a 2-layer model, a tokenizer trained with
``tokenizers``, 64 chat records) in a temporary folder, then times in one
run, each in a fresh process: all nine preflight checks through the CLI
(target: under 60 s on two cores), and, as the floor, a process
that imports torch and transformers, loads the same model and runs one
forward/backward/AdamW step (what any check costs at least).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _report import print_table  # noqa: E402

FLOOR = """
import sys, torch
from transformers import AutoModelForCausalLM
m = AutoModelForCausalLM.from_pretrained(sys.argv[1])
ids = torch.randint(5, 50, (4, 32))
loss = m(input_ids=ids, labels=ids).loss
loss.backward()
torch.optim.AdamW(m.parameters()).step()
"""


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arch", default="llama", choices=["llama", "gpt2"])
    args = parser.parse_args()
    from ftmanifest.examples.project import build_example

    with tempfile.TemporaryDirectory(prefix="ftm-bench-preflight-") as tmp:
        manifest = build_example(Path(tmp) / "tiny", arch=args.arch)
        floor = timed([sys.executable, "-c", FLOOR, str(manifest.parent / "model")])
        full = timed([sys.executable, "-m", "ftmanifest", "preflight", str(manifest),
                      "--ledger", str(Path(tmp) / "ledger")])  # fmt: skip
    rows = [(f"preflight, 9 checks ({args.arch})", f"{full:.1f} s", f"{floor:.1f} s one step",
             f"{full / floor:.1f}x", "< 60 s", full < 60)]  # fmt: skip
    return print_table(rows, "tiny example, CPU, fresh processes")


if __name__ == "__main__":
    sys.exit(main())
