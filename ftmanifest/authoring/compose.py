"""``init --from``: the sources read, the judgement left as FILLs, the manifest written out.

Layer: edges - authoring.  ``author`` returns the text and what went into it (each
derived value with its file and key, each FILL with what to decide, the
notes); ``cli/init.py`` writes the file and prints the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftmanifest.authoring import data_files
from ftmanifest.authoring.draft import Derived, Draft
from ftmanifest.authoring.lockfile import lock_file, make_note
from ftmanifest.authoring.model_source import relative
from ftmanifest.authoring.render import emit
from ftmanifest.authoring.sources import read_all
from ftmanifest.errors import InputError
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest.load import Document
from ftmanifest.manifest.validate import schema_findings

LOCK = "`ftmanifest lock` fills it"
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
# What stands beside a FILL mark: null, which the schema or lint refuses, never a value
# that looks chosen; an empty guard list (lint's FTM071 refuses it) keeps the list a list.
PLACEHOLDERS: dict[str | int, Any] = {"guards": []}
SCHEMA_FILL = "required by the manifest schema: {expected}"
ORDER: dict[str, list[str]] = {
    "": "ftmanifest experiment model environment seeds data method training distributed "
    "export security".split(),
    "experiment": "id task hypothesis guards".split(),
    "model": "repo path revision attn_implementation license terms_url terms_accepted files "
    "tree_digest".split(),
    "method": "kind r alpha dropout target_modules exclude_modules modules_to_save bias "
    "use_rslora use_dora".split(),
    "training": "seq_len micro_batch grad_accum loss_normalization loss_on precision "
    "activation_checkpointing max_grad_norm optimizer packing objective max_steps epochs".split(),
    "training.optimizer": "name lr weight_decay schedule warmup_steps betas eps".split(),
}


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
    lock = lock_file(manifest)
    doc, comments = _document(draft, data, experiment_id, lock)
    while _schema_fills(draft, doc):  # a field the schema needs that nothing stated
        doc, comments = _document(draft, data, experiment_id, lock)
    header = [
        f"# yaml-language-server: $schema={schema_ref}",
        f"# written by `ftmanifest init --from {' '.join(_shown(sources, base))}`: each derived "
        "value names",
        "# its source; fill in every FILL, make the lock file, then `ftmanifest lock` pins",
        "# digests, versions and the code commit, and `ftmanifest lint` says what is left.",
    ]
    text = "\n".join(header + emit(doc, comments)) + "\n"
    fills = [(format_loc(loc), why) for loc, why in draft.fills.items()]
    return Authored(text, list(draft.values.values()), fills, draft.notes)


def _shown(sources: list[str], base: Path) -> list[str]:
    """The sources as the header names them: a path relative to the manifest's folder."""
    return [relative(Path(s), base) if Path(s).exists() else s for s in sources]


def _document(
    draft: Draft, data: list[dict[str, Any]], experiment_id: str, lock: tuple[str, str]
) -> tuple[dict[str, Any], dict[Loc, str]]:
    doc: dict[str, Any] = {
        "ftmanifest": 1,
        "experiment": {"id": experiment_id, "task": None, "hypothesis": None, "guards": []},
        "model": {"license": None, "terms_accepted": False, "files": [], "tree_digest": None},
        "environment": {
            "python": None,
            "packages": {},
            "lock": {"path": lock[0]},
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
        ("environment", "lock", "path"): make_note(lock[1]),
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
        if loc[0] != "data":  # the data entries carry their values already
            _set(doc, loc, item.value)
        comments[loc] = item.comment
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
    """FILLs for what lint or the schema needs and no source said."""
    if draft.get(("model", "repo")) is None and draft.get(("model", "path")) is None:
        draft.fill(
            ("model", "repo"),
            "the base model: org/name on the hub (or path: its "
            "local folder); --from MODEL_DIR or org/name@revision derives it",
        )
    kind = draft.get(("method", "kind"))
    if kind is None:
        draft.fill(
            ("method", "kind"),
            "full | lora | peft: what is trained (an adapter's "
            "config gives it: --from adapter_config.json)",
        )
    if kind == "lora":
        draft.fill(
            ("method", "target_modules"),
            "the modules LoRA wraps: [q_proj, v_proj], all-linear, or a regex",
        )
        draft.fill(("method", "r"), "the LoRA rank")
        draft.fill(("method", "alpha"), "the LoRA alpha")
    for loc in list(draft.fills):
        if loc[:2] in (("method", "r"), ("method", "alpha")) and kind != "lora":
            del draft.fills[loc]
    said = set(draft.values) | set(draft.fills)
    if any(loc[:2] == ("training", "optimizer") for loc in said):
        draft.fill(("training", "optimizer", "name"), "the optimizer, e.g. adamw_torch")
        draft.fill(("training", "optimizer", "lr"), "the peak learning rate")
    if any(loc[:2] == ("training", "objective") for loc in said):
        draft.fill(
            ("training", "objective", "kind"),
            "sft | dpo | kto | orpo | cpo | reward | grpo: the trainer the config runs",
        )
    if draft.get(("distributed", "strategy")) not in (None, "none"):
        draft.fill(("distributed", "world_size"), "the processes the run uses (GPUs x nodes)")
    draft.fill(("training", "grad_accum"), "micro-batches per optimizer step (1: none)")
    draft.fill(
        ("training", "loss_normalization"),
        "per-token | per-sequence: how the loss of a step is averaged",
    )


def _schema_fills(draft: Draft, doc: dict[str, Any]) -> bool:
    """Check ``doc`` against the schema: a derived value it refuses is the source's
    mistake (an error naming its file and key, before anything is written); a
    required field nothing stated becomes a FILL (True: render again)."""
    added = False
    for f in schema_findings(Document("manifest", "yaml", "", doc)):
        loc = f.loc or ()
        if any(loc[: len(fill)] == fill for fill in draft.fills):
            continue  # a FILL's null placeholder: the person fills it
        item = next((d for at, d in draft.values.items() if loc[: len(at)] == at), None)
        if item is not None:
            raise InputError(
                f"{item.key} cannot be {format_loc(item.loc)}: {f.message}",
                path=item.source,
                field=item.key,
                expected=f.expected,
                observed=f.observed or repr(item.value),
                hint=f"fix {item.key} in {item.source}, or leave it out and fill "
                f"{format_loc(item.loc)} in the manifest",
            )
        draft.fill(loc, SCHEMA_FILL.format(expected=f.expected or f.message))
        added = True
    return added


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
