"""Time `ftmanifest lint` on one manifest as a whole process, against `python -c pass`.

Target: the difference is under 100 ms, so the pre-commit hook is
not felt.  Prints medians over --runs runs, interleaved so both see the same
machine load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "manifests" / "docroute-lora-r16.yaml"


# Measure what a user sees: bytecode caches written once, as a normal install has.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    script = shutil.which("ftmanifest", path=str(Path(sys.executable).parent))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -m ftmanifest lint": [sys.executable, "-m", "ftmanifest", "lint", str(MANIFEST)],
    }
    if script:
        commands["ftmanifest lint (console script)"] = [script, "lint", str(MANIFEST)]
    hook = shutil.which("ftmanifest-lint", path=str(Path(sys.executable).parent))
    if hook:
        commands["ftmanifest-lint (pre-commit hook)"] = [hook, str(MANIFEST)]
    check = subprocess.run(commands["python -m ftmanifest lint"], capture_output=True, env=ENV)
    if check.returncode != 0:
        print("lint failed on the example manifest:", check.stdout, check.stderr)
        return 1
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            samples[name].append(_time(cmd))
    base = statistics.median(samples["python -c pass"])
    print(f"{'command':36} {'median ms':>10} {'over python ms':>15}")
    worst = 0.0
    for name, values in samples.items():
        med = statistics.median(values)
        over = (med - base) * 1000
        if name != "python -c pass":
            worst = max(worst, over)
        print(f"{name:36} {med * 1000:10.1f} {over:15.1f}")
    verdict = "meets" if worst < 100 else "MISSES"
    print(f"lint costs {worst:.1f} ms over interpreter start: {verdict} the 100 ms target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
