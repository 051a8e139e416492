"""``init --from``: the sources read, the judgement left as FILLs, the manifest written out.

Layer: authoring.  ``author`` returns the text and what went into it (each
derived value with its file and key, each FILL with what to decide, the
notes); ``cli/init.py`` writes the file and prints the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.authoring import data_files
from ftmanifest.authoring.draft import Derived, Draft
from ftmanifest.authoring.render import emit
from ftmanifest.authoring.sources import read_all
from ftmanifest.location import Loc, format_loc

LOCK = "`ftmanifest lock` fills it"
LOCK_FILE_NOTE = (
    "make it: pip freeze > requirements.lock (or uv pip compile / pip-compile "
    "--generate-hashes); `ftmanifest lock` pins its digest"
)
# What only a person can decide, always asked for (data FILLs come per entry).
JUDGEMENT: dict[Loc, str] = {
    ("experiment", "task"): "classification | extraction | generation | other: the behaviour "
    "trained",
    ("experiment", "hypothesis"): "what should improve, by how much, versus the baseline",
    ("experiment", "guards"): "what must not get worse, e.g. [{kind: per_category, metric: f1, "
    "split: eval, max_drop: 0.02}] (per-category for classification)",
    ("model", "license"): "the weights' licence; set terms_accepted: true once its terms are read",
    ("security", "retention"): "how long checkpoints, logs and raw data copies are kept, e.g. "
    "{checkpoints: 30d, logs: 90d, raw_data: 180d}",
}
# Schema-valid stand-ins for a FILL the schema needs a value for (LoRA's rank).
PLACEHOLDERS: dict[str | int, Any] = {"guards": [], "r": 16, "alpha": 32.0}
ORDER: dict[str, list[str]] = {
    "": ["ftmanifest", "experiment", "model", "environment", "seeds", "data", "method",
         "training", "distributed", "export", "security"],
    "experiment": ["id", "task", "hypothesis", "guards"],
    "model": ["repo", "path", "revision", "attn_implementation", "license", "terms_url",
              "terms_accepted", "files", "tree_digest"],
    "method": ["kind", "r", "alpha", "dropout", "target_modules", "exclude_modules",
               "modules_to_save", "bias", "use_rslora", "use_dora"],
    "training": ["seq_len", "micro_batch", "grad_accum", "loss_normalization", "loss_on",
                 "precision", "activation_checkpointing", "max_grad_norm", "optimizer",
                 "packing", "objective", "max_steps", "epochs"],
}  # fmt: skip


@dataclass
class Authored:
    text: str
    derived: list[Derived]
    fills: list[tuple[str, str]]
    notes: list[str]


def author(sources: list[str], manifest: Path, experiment_id: str, schema_ref: str) -> Authored:
    base = manifest.parent
    draft = read_all(sources, base)
    data = data_files.entries(draft, base)
    doc, comments = _document(draft, data, experiment_id)
    header = [
        f"# yaml-language-server: $schema={schema_ref}",
        f"# written by `ftmanifest init --from {' '.join(sources)}`: each derived value names",
        "# its source; fill in every FILL, make the lock file, then `ftmanifest lock` pins",
        "# digests, versions and the code commit, and `ftmanifest lint` says what is left.",
    ]
    text = "\n".join(header + emit(doc, comments)) + "\n"
    fills = [(format_loc(loc), why) for loc, why in draft.fills.items()]
    return Authored(text, list(draft.values.values()), fills, draft.notes)


def _document(
    draft: Draft, data: list[dict[str, Any]], experiment_id: str
) -> tuple[dict[str, Any], dict[Loc, str]]:
    doc: dict[str, Any] = {
        "ftmanifest": 1,
        "experiment": {"id": experiment_id, "task": None, "hypothesis": None, "guards": []},
        "model": {"license": None, "terms_accepted": False, "files": [], "tree_digest": None},
        "environment": {
            "python": None,
            "packages": {},
            "lock": {"path": "requirements.lock"},
            "backend": {"kind": None},
            "code": {"commit": None},
        },
        "seeds": {},
        "data": data,
        "security": {"retention": {"checkpoints": None, "logs": None, "raw_data": None}},
    }
    comments: dict[Loc, str] = {
        ("model", "terms_accepted"): "true once the model's download terms are read and accepted",
        ("model", "files"): LOCK,
        ("model", "tree_digest"): LOCK,
        ("environment", "python"): LOCK,
        ("environment", "packages"): LOCK,
        ("environment", "lock", "path"): LOCK_FILE_NOTE,
        ("environment", "backend", "kind"): f"{LOCK} (cuda | rocm | mps | cpu), with versions",
        ("environment", "code", "commit"): "`ftmanifest lock` pins the training code's git commit",
    }
    for i in range(len(data)):
        comments[("data", i, "digest")] = LOCK
        comments[("data", i, "records")] = LOCK
    for loc, why in JUDGEMENT.items():
        draft.fill(loc, why)
    if draft.get(("model", "repo")) and draft.get(("model", "revision")) is None:
        comments[("model", "revision")] = "`ftmanifest lock` pins the commit of main"
        _set(doc, ("model", "revision"), None)
    _required(draft)
    for loc, item in draft.values.items():
        if loc[0] == "data":
            continue  # the entries carry their values already
        _set(doc, loc, item.value)
        comments[loc] = f"from {item.source}: {item.key}"
    for loc, item in draft.values.items():
        if loc[0] == "data":
            comments[loc] = f"from {item.source}: {item.key}"
    if not doc["seeds"]:
        for name in ("python", "numpy", "torch", "data_order"):
            draft.fill(("seeds", name), "the seed the run sets (random, numpy, torch, sampler)")
    for loc, why in draft.fills.items():
        comments[loc] = f"FILL: {why}"
        if not _has(doc, loc):
            _set(doc, loc, PLACEHOLDERS.get(loc[-1]))
    return _ordered(doc, ""), comments


def _has(doc: dict[str, Any], loc: Loc) -> bool:
    node: Any = doc
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return False
    return True


def _required(draft: Draft) -> None:
    """FILLs for what lint needs and no source said."""
    kind = draft.get(("method", "kind"))
    if kind == "lora":
        draft.fill(("method", "target_modules"), "the modules LoRA wraps: [q_proj, v_proj], "
                   "all-linear, or a regex")  # fmt: skip
        draft.fill(("method", "r"), "the LoRA rank")
        draft.fill(("method", "alpha"), "the LoRA alpha")
    draft.fill(("training", "grad_accum"), "micro-batches per optimizer step (1: none)")
    draft.fill(
        ("training", "loss_normalization"),
        "per-token | per-sequence: how the loss of a step is averaged",
    )
    for loc in list(draft.fills):
        if loc[:2] == ("method", "r") or loc[:2] == ("method", "alpha"):
            if kind != "lora":
                del draft.fills[loc]


def _set(doc: dict[str, Any], loc: Loc, value: Any) -> None:
    node: Any = doc
    for part in loc[:-1]:
        node = node.setdefault(part, {})
    node[loc[-1]] = value


def _ordered(node: dict[str, Any], where: str) -> dict[str, Any]:
    order = ORDER.get(where, [])
    keys = sorted(node, key=lambda k: order.index(k) if k in order else len(order))
    out: dict[str, Any] = {}
    for key in keys:
        value = node[key]
        if isinstance(value, dict):
            value = _ordered(value, f"{where}.{key}" if where else key)
        out[key] = value
    return out
