"""``data sample --from-run``: the examples as the trainer itself fed them, from a run record.

Layer: judging rooms - data (reads a run record file or the manifest's ledger; returns
data, prints nothing).  The Trainer guard keeps the first micro-batches the model was
fed (``integrations.batches``): ids, loss mask, attention mask and the decoded text with
secrets and personal data redacted.  ``from_run`` reads them back, from a run record
file (``ftmanifest-run.json``) or from the attempt the ledger knows by that id (an
attempt id or prefix, a record id prefix, an experiment id: as ``ledger show`` finds
it).  Only what the record holds is shown, so no secret the recorder redacted can come
back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ftmanifest.errors import InputError, UsageError
from ftmanifest.ledger import Ledger, ledger_dir
from ftmanifest.ledger.attempts import attempts, find

ROW_KEYS = ("row", "pair", "length", "tokens", "loss_tokens", "text", "marked", "redacted",
            "cut", "text_cut", "loss_mask", "attention_mask", "input_ids")  # fmt: skip


def _from_ledger(manifest: Path, run: str) -> tuple[dict[str, Any], str]:
    store = Ledger(ledger_dir(manifest))
    items = attempts(store.read().entries) if store.exists() else []
    hits = find(items, run)
    if len(hits) != 1:
        raise UsageError(
            f"no run record {run!r}: not a file, and "
            + ("no attempt by that id in the ledger" if not hits else "it names several attempts"),
            path=str(store.root),
            field="--from-run",
            expected="a run record file (ftmanifest-run.json) or an attempt id the ledger knows",
            observed=run if not hits else ", ".join(a.id for a in hits[:5]),
            hint="`ftmanifest ledger list --manifest M` lists the attempts",
        )
    entries = hits[0].entries
    with_batches = [e for e in entries if isinstance(e.record.get("batches"), dict)]
    entry = (with_batches or entries)[-1]
    return dict(entry.record), f"attempt {hits[0].id} ({entry.file})"


def _from_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(
            "the run record cannot be read",
            path=str(path),
            field="--from-run",
            expected="a run record the Trainer guard wrote (JSON)",
            observed=f"{type(exc).__name__}: {exc}"[:200],
            hint="pass the ftmanifest-run.json of the run's output folder, or an attempt id",
        ) from exc
    if not isinstance(data, dict):
        raise InputError("the run record is not a JSON object", path=str(path),
                         field="--from-run", expected="a JSON object",
                         observed=type(data).__name__,
                         hint="pass the ftmanifest-run.json the Trainer guard wrote")  # fmt: skip
    return data


def from_run(manifest: Path, run: str) -> dict[str, Any]:
    """The recorded micro-batches of ``run`` (a run record file or an attempt id), as data."""
    path = Path(run)
    if path.is_file():
        record, source = _from_file(path), f"run record {path}"
    else:
        record, source = _from_ledger(manifest, run)
    batches = record.get("batches")
    micro = batches.get("micro_batches") if isinstance(batches, dict) else None
    if not isinstance(batches, dict) or not micro:
        why = (
            "the record has no batches: written before the Trainer guard kept them, or not by it"
            if not isinstance(batches, dict)
            else f"the guard did not record any: {batches.get('why_not') or 'no micro-batch'}"
        )
        raise InputError(
            "the run record holds no batches the trainer fed the model",
            path=source.removeprefix("run record "),
            field="batches",
            expected="the first micro-batches the Trainer guard records",
            observed=why,
            hint="train with the Trainer guard (FtManifestCallback) and pass that run's record; "
            "without --from-run, data sample shows ftmanifest's own computation",
        )
    out = []
    for b in micro:
        rows = [{k: ex.get(k) for k in ROW_KEYS} for ex in b.get("examples", [])]
        out.append({"index": b.get("index"), "tensors": b.get("tensors", {}),
                    "loss_mask_from": b.get("loss_mask_from"),
                    "why_not": b.get("why_not") or b.get("why_no_loss_mask"),
                    "examples": rows})  # fmt: skip
    return {
        "ok": True,
        "manifest": str(manifest),
        "from_run": source,
        "attempt": record.get("attempt"),
        "status": record.get("status"),
        "arguments": batches.get("arguments"),
        "kind": batches.get("kind"),
        "recorded_by": batches.get("recorded_by"),
        "micro_batches": out,
    }
