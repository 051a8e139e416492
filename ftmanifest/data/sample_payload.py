"""What ``data sample`` shows, as data (out of the command).

Layer: judging rooms - data (edge: streams the chosen splits and loads the pinned
tokenizer through ``ftmanifest.data.sample``; returns data, prints nothing).
``sample_payload`` chooses the records of the splits named (an unknown split or an image
folder named is refused), formats each as preflight does and says where the seed,
``seq_len`` and the tokenizer came from; ``refuse_output`` keeps the HTML page off the
manifest, a data file and every pinned folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ftmanifest.data import sample as s
from ftmanifest.data.leak_report import ROLE_ORDER
from ftmanifest.data.splits import refuse_into_pinned, splits_of
from ftmanifest.data.trl_sft import sft_format
from ftmanifest.errors import FtManifestError, UsageError
from ftmanifest.manifest import LoadedManifest
from ftmanifest.manifest.model import Manifest


def _selected(loaded: LoadedManifest, names: Sequence[str]) -> Any:
    """``loaded`` with only the data entries ``names`` names (every sampled one if none)."""
    entries = [d for d in loaded.manifest.data if d.role in ROLE_ORDER]
    there = [d.name for d in entries]
    unknown = [n for n in names if n not in there]
    if unknown:
        raise UsageError(
            f"no split named {unknown[0]!r} to sample",
            path=str(loaded.path),
            field="--split",
            expected="one of: " + (", ".join(there) or "(no train/eval/test split)"),
            observed=unknown[0],
            hint="name a data entry with role train, eval, baseline-eval or test",
        )
    if names:
        entries = [d for d in entries if d.name in names]
    images = [d.name for d in entries if d.format == "images"]
    if names and images:
        raise UsageError(
            f"data entry {images[0]!r} is an image folder",
            path=str(loaded.path),
            field="--split",
            expected="a split of text records (jsonl, json, csv, tsv, parquet, text)",
            observed="format: images",
            hint="`ftmanifest data check` reports image folders per class",
        )
    manifest = loaded.manifest.model_copy(update={"data": entries})
    return SimpleNamespace(path=loaded.path, manifest=manifest)


NOT_THE_TRAINERS = "computed by ftmanifest's preprocessing (not the trainer's batches)"
FROM_RUN = "run the guard and use --from-run RUN to see the trainer's own batches"
WAYS = {
    "preflight": "preflight's default recipe; a training script's own preprocessing or "
    "collator, or TRL's SFTTrainer, may feed other tokens (training.objective.kind: sft "
    "shows TRL's)",
    "trl-sft": "as TRL's SFTTrainer prepares it (training.objective.kind: sft), checked token "
    "for token against trl 1.x",
}


def preparation(manifest: Manifest) -> tuple[str | None, Callable[..., Any] | None, str]:
    """How ``data sample`` formats a record for ``manifest``'s trainer: (way, format, what it
    says); way ``None``: ftmanifest does not reproduce that trainer's preprocessing."""
    objective = manifest.training.objective
    kind = objective.kind if objective is not None else None
    if kind in (None, "trainer"):
        return "preflight", None, f"{NOT_THE_TRAINERS}: {WAYS['preflight']}"
    if kind == "sft":
        return "trl-sft", sft_format, f"{NOT_THE_TRAINERS}: {WAYS['trl-sft']}"
    return (
        None,
        None,
        (
            f"cannot show {kind.upper()}'s batches itself (training.objective.kind: {kind}): "
            f"ftmanifest does not reproduce TRL's {kind} preprocessing token for token; {FROM_RUN}"
        ),
    )


def sample_payload(
    loaded: LoadedManifest,
    *,
    per_category: int,
    splits: Sequence[str] = (),
    seed: int | None = None,
    allow_outside: bool = False,
) -> dict[str, Any]:
    """Everything shown, as data (the JSON output; text and HTML render it):
    ``per_category`` records of every category of the ``splits`` named (every
    train/eval/test/baseline-eval split if none), chosen with ``seed`` (default:
    the manifest's seeds), each formatted with the pinned tokenizer."""
    m = loaded.manifest
    chosen_splits = splits_of(_selected(loaded, splits), allow_outside=allow_outside)
    seed, seed_from = (seed, "--seed") if seed is not None else s.default_seed(m)
    label, target = m.data_checks.label, m.data_checks.target
    chosen = s.choose(chosen_splits, per_category, seed, label)
    way, fmt, how = preparation(m)
    tok = s.load_tokenizer(loaded, allow_outside=allow_outside)
    if way is None:
        tok = s.Tokenizer(None, tok.folder, how, tok.chat_template)
    seq_len = m.training.seq_len or s.DEFAULT_SEQ_LEN
    # TRL's SFTTrainer puts the loss on the completion unless told otherwise
    loss_on = m.training.loss_on or ("completion" if way == "trl-sft" else "all")
    ok = True
    out_splits = []
    for sp in chosen:
        cats = []
        for cat, picks in sp.picks.items():
            examples = []
            for p in picks:
                where, expected = s.target_of(p.value, target, label)
                ex: dict[str, Any] = {"record": p.number, "line": p.line,
                                      "target": {"field": where, "text": expected},
                                      "rendered": None, "raw": s.raw_fields(p.value),
                                      "error": None}  # fmt: skip
                if p.shard:
                    ex["shard"] = p.shard
                if tok.tokenizer is not None:
                    try:
                        ex["rendered"] = s.render(p, tok.tokenizer, seq_len, loss_on, fmt)
                    except FtManifestError as exc:
                        ex["error"], ok = exc.message, False
                    except Exception as exc:  # a chat template that raises is a finding here
                        ex["error"], ok = f"{type(exc).__name__}: {exc}", False
                examples.append(ex)
            cats.append({"category": cat, "records": sp.counts[cat], "examples": examples})
        out_splits.append({"name": sp.name, "role": sp.role, "records": sp.records,
                           "categories": cats})  # fmt: skip
    return {
        "ok": ok,
        "manifest": str(loaded.path),
        "per_category": per_category,
        "seed": seed,
        "seed_from": seed_from,
        "rendered": tok.tokenizer is not None,
        "computed_by": {"by": "ftmanifest", "way": way, "says": how},
        "tokenizer": {
            "folder": tok.folder,
            "chat_template": tok.chat_template,
            "reason": tok.reason,
        },  # fmt: skip
        "seq_len": seq_len,
        "seq_len_from": "training.seq_len" if m.training.seq_len else "preflight's default",
        "loss_on": loss_on,
        "splits": out_splits,
        "skipped": [d.name for d in loaded.manifest.data if d.format == "images"],
    }


def refuse_output(out: Path, loaded: LoadedManifest, payload: dict[str, Any], flag: str) -> None:
    """The page (``flag``) must not replace the manifest or a data file it read, nor add a
    file to the pinned model's folder (that would be drift of the model)."""
    base = Path(loaded.path).parent
    inputs = [Path(loaded.path)] + [base / d.path for d in loaded.manifest.data]
    model = payload["tokenizer"]["folder"]
    refuse_into_pinned(out, loaded, flag, model)
    for p in inputs:
        try:
            same = os.path.samefile(out, p)
        except OSError:
            same = False
        if same:
            raise UsageError(
                f"{flag} would overwrite an input",
                path=str(out),
                field=flag,
                expected="a new file",
                observed=f"the same file as {p}",
                hint=f"write the page somewhere else, e.g. {flag} sample.html",
            )
