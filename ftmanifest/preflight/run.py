"""Run the preflight checks and record the result.

Layer: judging rooms - edge.  ``run_preflight`` builds the recipe (``recipe``), seeds
every library from the manifest before each check (so each is reproducible alone), runs
the named checks in order, and returns the rows.  A check that raises is a failed row
with the error, never a pass.  ``record`` is what the ledger keeps: the manifest digest,
the recipe's digest (the manifest without what does not change the training: ids,
descriptions, guards, export, security), the environment fingerprint and platform, and
the rows; signed when the ledger signs (``$FTMANIFEST_LEDGER_KEY``).
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import ftmanifest
from ftmanifest.errors import UsageError
from ftmanifest.ledger import open_ledger
from ftmanifest.manifest import LoadedManifest
from ftmanifest.manifest.environment import fingerprint
from ftmanifest.manifest.identity import recipe_digest
from ftmanifest.preflight.checks import Check, Options, Row, State, disk, stack, tokens
from ftmanifest.preflight.recipe import apply_hook, default_recipe
from ftmanifest.preflight.train_checks import (
    determinism,
    overfit,
    resume,
    step,
    throughput,
    update,
)
from ftmanifest.progress import live
from ftmanifest.seeding import seed_everything

# The checks in the order they run and report: the setup first, then those that train.
CHECKS: dict[str, Check] = {
    "stack": stack,
    "disk": disk,
    "tokens": tokens,
    "step": step,
    "update": update,
    "overfit": overfit,
    "resume": resume,
    "determinism": determinism,
    "throughput": throughput,
}


@dataclass
class Preflight:
    rows: list[Row] = field(default_factory=list)
    recipe_source: str = "manifest"
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.ok for r in self.rows)


def selected(only: Sequence[str]) -> list[str]:
    unknown = [n for n in only if n not in CHECKS]
    if unknown:
        raise UsageError(
            f"no preflight check named {unknown[0]!r}",
            field="--only",
            expected="one of: " + ", ".join(CHECKS),
            observed=unknown[0],
        )
    return [n for n in CHECKS if not only or n in only]


def run_preflight(
    loaded: LoadedManifest,
    *,
    only: Sequence[str] = (),
    options: Options | None = None,
    recipe_spec: str | None = None,
    allow_outside: bool = False,
    say: Any = None,
) -> Preflight:
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own progress line says which check runs
    names = selected(only)
    options = options or Options()
    started = time.monotonic()
    recipe = apply_hook(default_recipe(loaded, allow_outside=allow_outside), recipe_spec)
    state = State(recipe, options, device=torch.device(options.device))
    seed_everything(loaded)
    state.examples = recipe.examples(limit=256)
    out = Preflight(recipe_source=recipe.source)
    for name in names:
        if say is not None:
            say(f"preflight: {name} ...")
        seed_everything(loaded)
        t0 = time.monotonic()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # library deprecations
                row = CHECKS[name](state)
        except Exception as exc:  # a check that cannot run is a failed row, never a pass
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            row = Row(name, False, f"could not run: {type(exc).__name__}: {first}"[:300])
        row.figures["seconds"] = round(time.monotonic() - t0, 3)
        out.rows.append(row)
    out.seconds = round(time.monotonic() - started, 3)
    return out


def record(loaded: LoadedManifest, result: Preflight, environment: Any) -> dict[str, Any]:
    """The ledger record of a preflight run."""
    backend = environment.backend if environment is not None else None
    return {
        "ftmanifest_version": ftmanifest.__version__,
        "status": "preflight",
        "ok": result.ok,
        "experiment": {
            "id": loaded.manifest.experiment.id,
            "parent": loaded.manifest.experiment.parent,
        },  # fmt: skip
        "manifest": {"digest": loaded.digest()},
        "recipe_digest": recipe_digest(loaded),
        "recipe_source": result.recipe_source,
        "environment": {
            "fingerprint": None if environment is None else fingerprint(environment),
            "platform": None
            if backend is None
            else {
                "kind": backend.kind,
                "driver": backend.driver,
                "runtime": backend.runtime,
                "devices": [d.name for d in backend.devices],
            },
        },  # fmt: skip
        "rows": [_slim(r) for r in result.rows],
        "seconds": result.seconds,
    }


def _slim(row: Row) -> dict[str, Any]:
    """A row without the rendered tokens (the record keeps figures, not examples)."""
    figures = {k: v for k, v in row.figures.items() if k != "rendered"}
    return {**row.to_dict(), "figures": figures}


def stderr_say(text: str) -> None:
    """The check that runs, as a line rewritten in place: on a terminal, never with -q."""
    if live(sys.stderr):
        sys.stderr.write(f"\r\x1b[K{text}")
        sys.stderr.flush()


def recorded_rows(loaded: LoadedManifest, ledger: Any = None) -> list[dict[str, dict[str, Any]]]:
    """The rows (name -> row) of every preflight of this recipe in the ledger,
    oldest first: what ``plan`` and ``estimate`` take their measurements from."""
    digest = recipe_digest(loaded)
    try:
        entries = open_ledger(loaded.path, ledger).read().entries
    except OSError:
        return []
    out = []
    for e in entries:
        r = e.record
        if r.get("status") == "preflight" and r.get("recipe_digest") == digest:
            raw = r.get("rows")
            rows: list[Any] = raw if isinstance(raw, list) else []
            named = {row["name"]: row for row in rows if isinstance(row, dict) and "name" in row}
            out.append({**named, "_record": r})
    return out
