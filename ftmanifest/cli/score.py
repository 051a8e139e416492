"""``ftmanifest score``: a results file from one split's predictions.

Layer: commands - edge.  Reads the manifest and the predictions (JSONL: ``id``,
``reference``, ``prediction``, optional ``category``; see
``ftmanifest.results.predictions``), refuses when the split's data is not the
pinned data, and writes the results file atomically.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ftmanifest.cli._args import add_format_argument, add_manifest_argument
from ftmanifest.fsutil import atomic_write_text
from ftmanifest.ledger.sealed import open_use, record_score
from ftmanifest.manifest import LoadedManifest, load_manifest
from ftmanifest.manifest.canonical import sha256_digest
from ftmanifest.output import note, table, to_json
from ftmanifest.results.resultsfile import build_results, dumps

PREDICTIONS_HELP = (
    "predictions, JSONL: one object per line with id (the split record's id value, or "
    "for a record without one its record number, counted from 1), "
    "reference (a label; for extraction an object of fields), prediction (a string: "
    "the label, or the raw model output) and optionally category"
)


DESCRIPTION = """\
Score one split's predictions (JSONL: id, reference, prediction, optional
category) into a results file bound by digest to the manifest, the split's
data, the predictions and the adapter.  Refuses when the split's file is not
the pinned data; scoring a sealed split consumes the use that
`ftmanifest unseal` recorded.  The file is written atomically.  Exit 0
written, 1 refused, 2 unusable input.
"""

EXAMPLES = """\
examples:
  ftmanifest score --manifest exp.yaml --split test --predictions out/test-preds.jsonl
  ftmanifest score --manifest exp.yaml --split eval --predictions eval-preds.jsonl --out eval.json
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "score",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="score predictions into a results file bound to its inputs",
    )
    add_manifest_argument(p, kind=str)
    p.add_argument("--split", required=True, metavar="NAME", help="name of the data entry scored")
    p.add_argument("--predictions", required=True, metavar="P", help=PREDICTIONS_HELP)
    p.add_argument(
        "--adapter",
        type=Path,
        metavar="DIR",
        help="the adapter folder that made the predictions, recorded by digest; a path "
        "that is not a folder is refused (default: export.path beside the manifest, "
        "recorded as none when nothing is there)",
    )
    p.add_argument(
        "-o",
        "--out",
        metavar="R",
        help="results file to write (default: beside the predictions, <name>.results.json)",
    )
    p.add_argument(
        "--ledger",
        type=Path,
        metavar="DIR",
        help="the ledger holding the sealed split's recorded uses (default: the repository's)",
    )
    add_format_argument(p)
    p.set_defaults(func=run)


def default_out(predictions: Path) -> Path:
    name = predictions.name.removesuffix(".jsonl").removesuffix(".ndjson")
    return predictions.with_name(f"{name}.results.json")


def run(args: argparse.Namespace) -> int:

    predictions = Path(args.predictions)
    out = Path(args.out) if args.out else default_out(predictions)
    loaded = load_manifest(args.manifest)
    results = build_results(loaded, args.split, predictions, args.adapter, out=out)
    text = dumps(results)
    if any(d.name == args.split and d.sealed for d in loaded.manifest.data):
        _consume_sealed_use(loaded, args, results["split"]["digest"], text)
    atomic_write_text(out, text)
    if args.format == "json":
        sys.stdout.write(to_json({"results": str(out), "metrics": results["metrics"]}))
    else:
        sys.stdout.write(summary(results, out))
    return 0


def _consume_sealed_use(
    loaded: LoadedManifest, args: argparse.Namespace, data: str, text: str
) -> None:
    """A sealed split is scored only against a use ``unseal`` recorded; this
    score consumes it (refused, nothing written, without one)."""

    use = open_use(loaded, args.split, data, ledger=args.ledger)
    record_score(loaded, use, sha256_digest(text.encode("utf-8")), ledger=args.ledger)
    note(f"sealed split {args.split}: scored use {use.use} (recorded)")


def summary(results: dict[str, Any], out: Path) -> str:

    m = results["metrics"]
    head = f"wrote {out}  ({results['task']}, split {results['split']['name']}, "
    head += f"{m['examples']} examples)\n"
    if results["task"] == "classification":
        rows = [
            (c, f"{s['precision']:.4f}", f"{s['recall']:.4f}", f"{s['f1']:.4f}", s["support"])
            for c, s in m["per_category"].items()
        ]
        tail = f"accuracy {m['accuracy']:.4f}  macro_f1 {m['macro_f1']:.4f}  "
        tail += f"micro_f1 {m['micro_f1']:.4f}\n"
        return head + table(rows, ("category", "precision", "recall", "f1", "support")) + tail
    rows2 = [
        (c, f"{s['format_validity']:.4f}", f"{s['required_fields']:.4f}", s["examples"])
        for c, s in m["per_category"].items()
    ]
    per_field = "  ".join(f"{k} {v:.4f}" for k, v in m["required_fields_per_field"].items())
    tail = f"format_validity {m['format_validity']:.4f}  required_fields "
    tail += f"{m['required_fields']:.4f}  field_exact_match {m['field_exact_match']:.4f}\n"
    tail += f"per field: {per_field or '(no required_fields guard)'}\n"
    header = ("category", "format_validity", "required_fields", "examples")
    return head + table(rows2, header) + tail
