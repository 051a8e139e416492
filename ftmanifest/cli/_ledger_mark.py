"""``ledger plan``, ``abandon`` and ``invalidate``: records appended to the ledger.

Layer: commands (private to ``ftmanifest.cli``: ``cli.ledger`` dispatches here).  Each
action appends one record and edits none: ``plan`` a planned attempt of a manifest,
``abandon`` and ``invalidate`` a mark with its reason on the attempt an ID names.  A
ledger that cannot be written is an error naming the folder.
"""

from __future__ import annotations

import argparse
from typing import Any

from ftmanifest.cli._ledger_read import out, print_json, resolve
from ftmanifest.fsutil import write_error
from ftmanifest.ledger import new_attempt, runrecord
from ftmanifest.ledger.runrecord import check_reason
from ftmanifest.manifest import load_manifest
from ftmanifest.safe_text import escape


def run_plan(store: Any, args: argparse.Namespace) -> int:

    path = args.plan_manifest
    loaded = load_manifest(path)
    record = {
        "status": "planned",
        "attempt": new_attempt(),
        "experiment": runrecord.experiment_of(loaded),
        "manifest": runrecord.manifest_ref(
            path, loaded.digest(), store.root, loaded=loaded, body=True
        ),
    }
    if args.reason:
        record["note"] = args.reason
    entry = _append(store, record)
    if args.format == "json":
        print_json({"attempt": record["attempt"], "record": entry.id, "file": str(entry.file)})
    else:
        out(f"planned: attempt {record['attempt']} of {escape(str(loaded.manifest.experiment.id))}"
            f" ({escape(str(entry.file))})\n")  # fmt: skip
    return 0


def run_mark(store: Any, args: argparse.Namespace) -> int:
    import ftmanifest

    reason = check_reason(args.reason)
    attempt = resolve(store, args.id)
    record = {
        "ftmanifest_version": ftmanifest.__version__,
        "status": args.mark,
        "reason": reason,
        "attempt": attempt.id,
        "experiment": {"id": attempt.experiment, "parent": attempt.parent},
        "manifest": {"digest": attempt.manifest_digest},
    }
    entry = _append(store, record)
    if args.format == "json":
        print_json({"attempt": attempt.id, "status": args.mark, "record": entry.id})
    else:
        out(f"{args.mark}: attempt {attempt.id} ({escape(str(attempt.experiment))}): "
            f"{escape(reason)}\n")  # fmt: skip
    return 0


def _append(store: Any, record: dict[str, Any]) -> Any:

    try:
        return store.append(record)
    except OSError as exc:
        raise write_error(exc, store.root, "cannot write to the ledger") from None
