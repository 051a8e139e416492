"""The results file: metrics bound to everything that produced them.

Layer: judging rooms - results (edge: hashes inputs, reads and writes results files).
``build_results`` scores one split's predictions and records, beside the
metrics, the manifest digest, the split's pinned and observed data digest
(refusing when they differ), the predictions' digest, the evaluation
procedure, the base model's tree digest and the adapter's file digests, so a
number is never detached from what produced it.  The document's shape is
``results.schema.json`` (packaged next to this module); ``load_results``
checks a file against it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.hashing.files import hash_file
from ftmanifest.hashing.tree import hash_tree
from ftmanifest.jsonschema_lib import jsonschema as load_jsonschema
from ftmanifest.ledger.sealed import split_digest
from ftmanifest.manifest.experiment import FormatValidityGuard, RequiredFieldsGuard
from ftmanifest.recordio import iter_records
from ftmanifest.results.predictions import read_predictions
from ftmanifest.results.score import score
from ftmanifest.results.split_match import check_split

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest

FORMAT = "ftmanifest-results"
VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("results.schema.json")


@cache
def results_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA_PATH.read_text("utf-8"))
    return data


def _guard_settings(loaded: LoadedManifest) -> tuple[str | None, list[str]]:
    """The format_validity guard's ``format`` and the required_fields guard's fields."""
    fmt: str | None = None
    fields: list[str] = []
    for guard in loaded.manifest.experiment.guards:
        if isinstance(guard, FormatValidityGuard):
            fmt = guard.format
        elif isinstance(guard, RequiredFieldsGuard):
            fields += [f for f in guard.fields if f not in fields]
    return fmt, fields


def _schema(loaded: LoadedManifest, fmt: str | None) -> tuple[dict[str, Any] | None, Any]:
    """A JSON Schema named by the guard's ``format`` (anything but ``json``), and its record."""
    if fmt is None or fmt.lower() == "json":
        return None, {"format": fmt or "json"}

    path = loaded.path.parent / fmt
    try:
        schema = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(
            "the format_validity guard's schema cannot be read",
            path=str(path),
            field="experiment.guards",
            expected="a JSON Schema file, relative to the manifest",
            observed=type(exc).__name__,
            hint="set the guard's format to json or to a readable schema file",
        ) from None
    return schema, {"format": fmt, "schema_digest": hash_file(path).digest}


def _adapter(loaded: LoadedManifest, root: Path | None = None) -> dict[str, Any] | None:
    """The adapter the predictions came from: ``root``, else ``export.path`` beside
    the manifest; None when the manifest exports none or nothing is at export.path.
    A ``root`` the user named must be an adapter folder, and the manifest must say
    where its adapter goes (the record names ``export.path``): ``InputError`` else,
    rather than a results file that silently records no adapter."""
    export = loaded.manifest.export
    if root is not None:
        _named_adapter(root, export is not None, loaded.path)
    if export is None:
        return None
    root = root if root is not None else loaded.path.parent / export.path
    if not root.is_dir():
        return None

    tree = hash_tree(root)
    files = {rel: d.digest for rel, d in tree.files.items()}
    return {"path": export.path, "tree_digest": tree.digest, "files": files}


def _named_adapter(root: Path, exported: bool, manifest: Path) -> None:
    """Refuse an ``--adapter`` that is not a folder, or one the manifest cannot name."""
    if not root.exists():
        raise InputNotFoundError(
            "adapter not found",
            path=str(root),
            field="--adapter",
            expected="the adapter folder that made the predictions",
            hint="check the path; leave --adapter out to record export.path beside the "
            "manifest (none when nothing is there)",
        )
    if not root.is_dir():
        raise InputError(
            "the adapter is not a folder",
            path=str(root),
            field="--adapter",
            expected="the adapter folder (adapter_config.json and its weights)",
            hint="name the folder that holds the adapter's files",
        )
    if not exported:
        raise InputError(
            "the manifest names no export.path, so the adapter cannot be recorded",
            path=str(manifest),
            field="export.path",
            expected="export.path: where the adapter is written, relative to the manifest",
            observed="no export section",
            hint="add export.path to the manifest, or leave --adapter out",
        )


def score_split(
    loaded: LoadedManifest, split: str, predictions: Path
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """``(split record, metrics, examples)`` of ``predictions`` on the pinned ``split``:
    refused when the split is not the pinned data or the predictions do not predict
    each of its records once with its own reference (``split_match``); examples are
    grouped by the split's categories, never the predictions'."""
    task = loaded.manifest.experiment.task or "unset"
    data = split_digest(loaded, split)
    items = read_predictions(predictions, task)
    fmt, fields = _guard_settings(loaded)
    schema, fmt_record = _schema(loaded, fmt) if task == "extraction" else (None, None)
    items = check_split(loaded, split, items, predictions)  # the split's categories
    metrics, examples = score(items, task, schema=schema, fields=fields)
    if task == "extraction":
        metrics = {**metrics, "format": fmt_record, "required_field_names": fields}
    return data, metrics, examples


def predictions_ref(predictions: Path, out: Path | None) -> str:
    """``predictions.path``: relative to the results file's folder (``out``), so
    ``audit`` finds the predictions to score again wherever the run folder is
    copied; without ``out``, the name (the results file is beside them)."""
    import os

    if out is None:
        return predictions.name
    return Path(os.path.relpath(predictions.resolve(), out.resolve().parent)).as_posix()


def build_results(
    loaded: LoadedManifest,
    split: str,
    predictions: Path,
    adapter: Path | None = None,
    *,
    out: Path | None = None,
) -> dict[str, Any]:
    """The results document for ``predictions`` on ``split`` (see the module doc);
    ``out``: where it will be written (``predictions.path`` is relative to it)."""
    task = loaded.manifest.experiment.task or "unset"
    adapter_record = _adapter(loaded, adapter)  # an unusable --adapter before any scoring
    data, metrics, examples = score_split(loaded, split, predictions)
    return {
        "format": FORMAT,
        "version": VERSION,
        "task": task,
        "manifest": {
            "experiment": loaded.manifest.experiment.id,
            "digest": loaded.digest(),
        },
        "split": data,
        "predictions": {
            "path": predictions_ref(predictions, out),
            "digest": hash_file(predictions).digest,
        },
        "procedure": loaded.manifest.evaluation.procedure,
        "model": {"tree_digest": loaded.manifest.model.tree_digest},
        "adapter": adapter_record,
        "metrics": metrics,
        "examples": examples,
    }


def dumps(results: dict[str, Any]) -> str:
    return json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def load_results(path: str | Path) -> dict[str, Any]:
    """A results file, checked against ``results.schema.json``; ``InputError`` if not one."""
    jsonschema = load_jsonschema()
    name = str(path)
    doc = next(iter(iter_records(path, "json")), None)
    value = doc.value if doc is not None else None
    validator = jsonschema.Draft202012Validator(results_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(document)"
        raise InputError(
            "not an ftmanifest results file",
            path=name,
            field=where,
            expected="a file written by `ftmanifest score` (results.schema.json)",
            observed=error.message[:200],
            hint="score the predictions again with `ftmanifest score`",
        )
    assert isinstance(value, dict)  # the schema's top-level type
    return value
