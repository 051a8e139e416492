"""The manifest's data entries as splits to check: role, resolved path, format, sealed.

Layer: judging rooms - data (edge: resolves paths against the manifest's folder,
refusing one that leaves it unless ``allow_outside``, as every reader of pinned paths
does).  ``splits_of`` gives the text splits (a file, or a folder of shards read as one
split: ``data.shards``; the leakage check and the statistics read them);
``image_splits_of`` the ``format: images`` folders (``data.images`` reads them); any
other format is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ftmanifest.data.leak_report import ROLE_ORDER, Split
from ftmanifest.data.shards import shard_names
from ftmanifest.errors import InputError, InputNotFoundError, UsageError
from ftmanifest.fsutil import resolve_inside
from ftmanifest.manifest import LoadedManifest

TEXT_FORMATS = frozenset({"jsonl", "json", "csv", "tsv", "parquet", "text"})
IMAGES = "images"


def splits_of(
    loaded: LoadedManifest, *, allow_outside: bool = False, fields: Sequence[str] = ()
) -> list[Split]:
    """One ``Split`` per text data entry whose role is train, eval, baseline-eval or test."""
    base = Path(loaded.path).parent
    out = []
    for i, entry in enumerate(loaded.manifest.data):
        if entry.role not in ROLE_ORDER or entry.format == IMAGES:
            continue
        if entry.format is not None and entry.format not in TEXT_FORMATS:
            raise InputError(
                f"data entry {entry.name!r} is not text records (format: {entry.format})",
                path=str(loaded.path),
                loc=("data", i, "format"),
                expected="one of " + ", ".join(sorted(TEXT_FORMATS | {IMAGES})),
                observed=entry.format,
                hint="declare the entry's format (images: a folder with one sub-folder per class)",
            )
        path = _located(base, i, entry, allow_outside, folder=False)
        shards = shard_names(path, ("data", i, "path")) if path.is_dir() else ()
        split = Split(
            entry.name, entry.role, path, entry.format, entry.sealed, tuple(fields), shards
        )
        out.append(split)
    _distinct(loaded)
    return out


def image_splits_of(loaded: LoadedManifest, *, allow_outside: bool = False) -> list[Split]:
    """One ``Split`` per ``format: images`` entry whose role is train, eval,
    baseline-eval or test (its path a folder; a missing one refused)."""
    base = Path(loaded.path).parent
    out = []
    for i, entry in enumerate(loaded.manifest.data):
        if entry.role not in ROLE_ORDER or entry.format != IMAGES:
            continue
        path = _located(base, i, entry, allow_outside, folder=True)
        out.append(Split(entry.name, entry.role, path, IMAGES, entry.sealed))
    _distinct(loaded)
    return out


def _located(base: Path, i: int, entry: Any, allow_outside: bool, *, folder: bool) -> Path:
    """The entry's path inside the manifest's folder: a file or a folder of shards,
    or (``folder``) an image folder with one sub-folder per class."""
    loc = ("data", i, "path")
    path = resolve_inside(base, entry.path, loc, allow_outside)
    kind = "folder" if folder else "file"
    if not path.exists():
        raise InputNotFoundError(
            f"data entry {entry.name!r}: {kind} not found: {entry.path}",
            path=str(path),
            loc=loc,
            expected="the split's image folder (one sub-folder per class)"
            if folder
            else "the split's data file",
            observed="nothing there",
            hint=f"fix the entry's path, or restore the {kind}",
        )
    if folder and not path.is_dir():
        raise InputError(
            f"data entry {entry.name!r} (format: images) is not a folder",
            path=str(path),
            loc=loc,
            expected="a folder with one sub-folder per class",
            observed="a file",
            hint="point the entry at the split's image folder, or fix its format",
        )
    return path


def _distinct(loaded: LoadedManifest) -> None:
    names = [e.name for e in loaded.manifest.data if e.role in ROLE_ORDER]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(
            f"two data entries are named {twice[0]!r}",
            path=str(loaded.path),
            field="data",
            expected="a distinct name per data entry",
            observed=twice[0],
            hint="rename one of them",
        )


def refuse_into_pinned(
    out: Path, loaded: LoadedManifest, flag: str, model: str | Path | None = None
) -> None:
    """Refuse an output (``flag``) inside a pinned folder: the model's (``model``, else
    the manifest's local ``model.path``) or a data entry that is a folder.  A new
    file there changes that folder's tree digest: the run would then drift."""
    base = Path(loaded.path).parent
    if model is None and loaded.manifest.model.path:
        model = base / loaded.manifest.model.path
    pinned = [("the pinned model's folder", Path(model))] if model is not None else []
    pinned += [(f"the pinned data folder {d.name!r}", base / d.path) for d in loaded.manifest.data]
    parents = Path(out).resolve().parents
    for what, folder in pinned:
        if folder.is_dir() and folder.resolve() in parents:
            raise UsageError(
                f"{flag} would write into {what} (a new file there is drift)",
                path=str(out),
                field=flag,
                expected="a path outside every pinned folder",
                observed=f"inside {folder}",
                hint=f"write it somewhere else, e.g. {flag} {Path(out).name}",
            )
