"""``ftmanifest estimate M``: the memory of one training step, from the model's config.

Layer: commands - edge (parsing and printing; the arithmetic is
``ftmanifest.preflight.estimate``, the config and headers are read by
``preflight.shapes.read_architecture``).  Reads no weights and imports no
torch.  Exit 0 with the breakdown and the levers; 2 unusable input (no
sequence length, the model folder or its config missing, an architecture the
estimator does not know).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ftmanifest.adapter.base import pinned_folder
from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.errors import EXIT_OK, InputError
from ftmanifest.manifest import LoadedManifest, load_manifest
from ftmanifest.manifest.model import Manifest
from ftmanifest.output import table, to_json
from ftmanifest.preflight.estimate import (
    ALLOCATORS,
    estimate,
    levers,
    lora_problems,
    setup_from_manifest,
    with_measured,
)
from ftmanifest.preflight.measured import allocator_here, compare_measured
from ftmanifest.preflight.run import recorded_rows
from ftmanifest.preflight.shapes import read_architecture

DESCRIPTION = """\
The memory of one training step, from the model's config and the manifest's
method: weights, gradients, optimizer state and activations, with the levers
that lower it.  Reads no weights and imports no torch.  The total assumes
the allocator of the manifest's backend and this environment (printed: on a
glibc host without MALLOC_MMAP_THRESHOLD_ it adds what malloc keeps resident).
The last preflight step's measured peak is set beside the estimate for the
shape that step ran.  Exit 0 with the breakdown, 2 unusable input (no
sequence length, the model folder or its config missing, an architecture the
estimator does not know).
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
                   help="allow a model path outside the manifest's "
                        "repository (or folder)")  # fmt: skip
    add_format_argument(p)
    p.set_defaults(func=run)


def _size(manifest: Manifest, path: Path, flag: int | None, name: str) -> int:
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
    from dataclasses import replace

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
    setup = replace(setup, allocator=allocator_here(m.environment.backend.kind))
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
    figures = last_step(loaded)
    if figures is not None:  # beside the estimate for the shape the step ran, not this one
        compared = compare_measured(arch, setup, figures)
        est = with_measured(est, compared.measured, compared)
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
    c = est.comparison
    if c is not None and c.measured is not None and c.estimate is not None:
        rows.append((f"measured peak ({c.seq_len} x {c.micro_batch})", gib(c.measured),
                     f"preflight step; estimated {gib(c.estimate)} for that shape and "
                     f"allocator ({c.allocator}), error {est.error:+.0%}"))  # fmt: skip
    out.write(table(rows, ("part", "bytes", "how")))
    out.write(f"allocator: {setup.allocator}: {ALLOCATORS.get(setup.allocator)}\n")
    if c is not None and c.why_not:
        out.write(f"measured peak: not compared: {c.why_not}\n")
    for note in est.notes:
        out.write(f"note: {note}\n")
    out.write("\nlevers, in the method's order:\n")
    lever_rows = [(lv.name, gib(lv.effect) if lv.effect is not None else "not computed",
                   gib(lv.estimate.total) if lv.estimate else "-", lv.change)
                  for lv in found]  # fmt: skip
    out.write(table(lever_rows, ("lever", "effect", "total", "change")))
    return EXIT_OK


def last_step(loaded: LoadedManifest) -> Mapping[str, Any] | None:
    """The figures of the last passing preflight step of this recipe, from the
    ledger (``preflight.run.recorded_rows``); None without one."""

    steps = [r["step"] for r in recorded_rows(loaded) if r.get("step", {}).get("ok")]
    found = steps[-1].get("figures") if steps else None
    return found if isinstance(found, Mapping) and found else None
