"""``ftmanifest estimate M``: the memory of one training step, from the model's config.

Layer: edge (parsing and printing; the arithmetic is
``ftmanifest.preflight.estimate``, the config and headers are read by
``preflight.shapes.read_architecture``).  Reads no weights and imports no
torch.  Exit 0 with the breakdown and the levers; 2 unusable input (no
sequence length, the model folder or its config missing, an architecture the
estimator does not know).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.errors import EXIT_OK, InputError

DESCRIPTION = """\
The memory of one training step, from the model's config and the manifest's
method: weights, gradients, optimizer state and activations, with the levers
that lower it.  Reads no weights and imports no torch.  Exit 0 with the
breakdown, 2 unusable input (no sequence length, the model folder or its
config missing, an architecture the estimator does not know).
"""

EXAMPLES = """\
examples:
  ftmanifest estimate exp.yaml
  ftmanifest estimate exp.yaml --seq-len 4096 --micro-batch 2 --format json
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "estimate",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="memory of one training step, from the model's config",
    )
    add_manifest_argument(p)
    p.add_argument("--seq-len", type=int, metavar="N", help="instead of training.seq_len")
    p.add_argument("--micro-batch", type=int, metavar="N", help="instead of training.micro_batch")
    p.add_argument("--allow-outside", action="store_true",
                   help="allow a model path outside the manifest's folder")  # fmt: skip
    add_format_argument(p)
    p.set_defaults(func=run)


def _size(manifest: Any, path: Path, flag: int | None, name: str) -> int:
    value = flag if flag is not None else getattr(manifest.training, name, None)
    if value is None or value < 1:
        raise InputError(
            f"no {name} to size the step with",
            path=str(path),
            loc=("training", name),
            expected="a positive integer",
            observed="absent" if value is None else str(value),
            hint=f"set training.{name} in the manifest, or pass --{name.replace('_', '-')} N",
        )
    return int(value)


def gib(n: int | None) -> str:
    """Bytes as MiB or GiB."""
    if n is None:
        return "-"
    return f"{n / 2**30:.2f} GiB" if abs(n) >= 2**30 else f"{n / 2**20:.1f} MiB"


def run(args: argparse.Namespace) -> int:
    from ftmanifest.adapter.base import pinned_folder
    from ftmanifest.manifest import load_manifest
    from ftmanifest.output import table, to_json
    from ftmanifest.preflight.estimate import (
        estimate,
        levers,
        lora_problems,
        setup_from_manifest,
        with_measured,
    )
    from ftmanifest.preflight.shapes import read_architecture

    loaded = load_manifest(args.manifest)
    m = loaded.manifest
    seq_len = _size(m, args.manifest, args.seq_len, "seq_len")
    micro_batch = _size(m, args.manifest, args.micro_batch, "micro_batch")
    if m.method is not None and m.method.kind == "peft" and m.method.trainable_params is None:
        raise InputError(
            f"the trainable parameters of peft method {m.method.peft_type} are unknown",
            path=str(args.manifest),
            loc=("method", "trainable_params"),
            expected="the method's trainable parameter count",
            observed="absent",
            hint="set method.trainable_params (peft's get_nb_trainable_parameters()[0])",
        )
    folder = pinned_folder(m, Path(args.manifest), allow_outside=args.allow_outside)
    arch = read_architecture(folder)
    setup = setup_from_manifest(m, seq_len=seq_len, micro_batch=micro_batch)
    problems = lora_problems(arch, setup, str(args.manifest))
    if problems:
        raise InputError(
            "the LoRA method names modules the model does not have",
            path=str(args.manifest),
            loc=("method", "target_modules"),
            expected=problems[0].expected,
            observed=problems[0].observed,
            hint=problems[0].hint,
            findings=problems,
        )
    est = estimate(arch, setup)
    if args.seq_len is None and args.micro_batch is None:
        measured = measured_peak(loaded, est)
        if measured is not None:
            est = with_measured(est, measured)
    found = levers(arch, setup)
    if args.format == "json":
        sys.stdout.write(to_json({
            "manifest": str(args.manifest), "model_folder": str(folder),
            "architecture": arch.model_type, "counted_from": arch.family,
            "seq_len": seq_len, "micro_batch": micro_batch, **est.to_dict(),
            "levers": [{"name": lv.name, "change": lv.change, "effect_bytes": lv.effect,
                        "total_bytes": lv.estimate.total if lv.estimate else None}
                       for lv in found],
        }))  # fmt: skip
        return EXIT_OK
    out = sys.stdout
    source = "config.json" if arch.family != "headers" else "safetensors headers"
    out.write(
        f"{arch.model_type}: {est.params:,} parameters (from {source}), {est.trainable:,} "
        f"trained; seq_len {seq_len} x micro_batch {micro_batch}, {setup.precision}, "
        f"strategy {setup.strategy}, world_size {setup.world_size}\n\n"
    )
    rows = [(p.name, gib(p.bytes), p.formula) for p in est.parts]
    rows.append(("total per process", gib(est.total), ""))
    if est.measured is not None:
        rows.append(("measured peak", gib(est.measured), f"error {est.error:+.0%}"))
    out.write(table(rows, ("part", "bytes", "how")))
    for note in est.notes:
        out.write(f"note: {note}\n")
    out.write("\nlevers, in the method's order:\n")
    lever_rows = [(lv.name, gib(lv.effect) if lv.effect is not None else "not computed",
                   gib(lv.estimate.total) if lv.estimate else "-", lv.change)
                  for lv in found]  # fmt: skip
    out.write(table(lever_rows, ("lever", "effect", "total", "change")))
    return EXIT_OK


def measured_peak(loaded: Any, est: Any) -> int | None:
    """The step's measured peak from the last passing preflight of this recipe:
    the device allocator's peak, else the host's rise during the step plus the
    weights (resident before it); None without such a record."""
    from ftmanifest.preflight.run import recorded_rows

    steps = [r["step"] for r in recorded_rows(loaded) if r.get("step", {}).get("ok")]
    found = (steps[-1].get("figures") or {}) if steps else None
    if not found:
        return None
    if isinstance(found.get("peak_device_bytes"), int):
        return int(found["peak_device_bytes"])
    peak, before = found.get("peak_host_bytes"), found.get("host_bytes_before")
    if isinstance(peak, int) and isinstance(before, int):
        weights = sum(p.bytes for p in est.parts if p.name.endswith("weights"))
        return max(peak - before, 0) + weights
    return None
