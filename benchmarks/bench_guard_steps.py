"""What the Trainer guard costs per optimizer step (the learning-rate check).

Usage: python benchmarks/bench_guard_steps.py [--steps 200] [--repeat 3]

Builds the tiny example, pins ``--steps`` steps, and times the training steps
alone (first ``on_step_begin`` to ``on_train_end``; the guard's start-up
verify is outside the window) of a real ``transformers.Trainer`` on the CPU,
unguarded and guarded, alternating; then the time spent inside the guard's
per-step check itself.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ftmanifest.examples.project import build_example
from ftmanifest.examples.training import tiny_trainer
from ftmanifest.integrations.transformers import FtManifestCallback
from ftmanifest.verify.lock import lock_manifest


class Clock(TrainerCallback):  # type: ignore[misc]
    def __init__(self) -> None:
        self.start = self.end = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step == 0:
            self.start = time.perf_counter()

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.end = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    root = Path(tempfile.mkdtemp())
    manifest = build_example(root / "ex")
    text = manifest.read_text("utf-8").replace("max_steps: 3", f"max_steps: {opts.steps}")
    manifest.write_text(text, "utf-8")
    lock_manifest(manifest)
    times: dict[str, list[float]] = {"unguarded": [], "guarded": []}
    checks: list[float] = []
    for i in range(opts.repeat):
        for kind in ("unguarded", "guarded"):
            clock = Clock()
            callbacks: list[Any] = [clock]
            guard = None
            if kind == "guarded":
                guard = FtManifestCallback(manifest, signature=False)
                callbacks.insert(0, guard)
            trainer = tiny_trainer(manifest.parent, root / f"out-{kind}-{i}", callbacks)
            if guard is not None:
                inner = guard.on_train_begin

                def timed(*a: Any, _inner: Any = inner, _g: Any = guard, **k: Any) -> None:
                    _inner(*a, **k)
                    check = _g._steps.check

                    def wrapped() -> None:
                        t = time.perf_counter()
                        check()
                        checks.append(time.perf_counter() - t)

                    _g._steps.check = wrapped

                guard.on_train_begin = timed
            trainer.train()
            assert trainer.state.global_step == opts.steps
            times[kind].append((clock.end - clock.start) / opts.steps)
    best = {k: min(v) for k, v in times.items()}
    print(f"{opts.steps} steps, best of {opts.repeat}, per step:")
    for kind, value in best.items():
        print(f"  {kind:10s} {value * 1e3:8.3f} ms")
    print(f"  difference {100 * (best['guarded'] / best['unguarded'] - 1):+.2f} %")
    checks.sort()
    print(
        f"  the check itself: median {checks[len(checks) // 2] * 1e6:.1f} us per step "
        f"({100 * checks[len(checks) // 2] / min(best.values()):.3f} % of the fastest step)"
    )


if __name__ == "__main__":
    main()
