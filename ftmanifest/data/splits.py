"""The manifest's data entries as splits to check: role, resolved path, format, sealed.

Layer: data (edge: resolves paths against the manifest's folder, refusing one
that leaves it unless ``allow_outside``, as every reader of pinned paths does).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ftmanifest.data.leakage import ROLE_ORDER, Split
from ftmanifest.errors import InputError, InputNotFoundError

TEXT_FORMATS = frozenset({"jsonl", "json", "csv", "tsv", "parquet", "text"})


def splits_of(
    loaded: Any, *, allow_outside: bool = False, fields: Sequence[str] = ()
) -> list[Split]:
    """One ``Split`` per data entry whose role is train, eval, baseline-eval or test."""
    from ftmanifest.observe import resolve_inside

    base = Path(loaded.path).parent
    out = []
    for i, entry in enumerate(loaded.manifest.data):
        if entry.role not in ROLE_ORDER:
            continue
        if entry.format is not None and entry.format not in TEXT_FORMATS:
            raise InputError(
                f"data entry {entry.name!r} is not text records (format: {entry.format})",
                path=str(loaded.path),
                loc=("data", i, "format"),
                expected="one of " + ", ".join(sorted(TEXT_FORMATS)),
                observed=entry.format,
                hint="`data check` compares text records; image folders are not checked yet",
            )
        path = resolve_inside(base, entry.path, ("data", i, "path"), allow_outside)
        if not path.exists():
            raise InputNotFoundError(
                f"data entry {entry.name!r}: file not found: {entry.path}",
                path=str(path),
                loc=("data", i, "path"),
                expected="the split's data file",
                observed="nothing there",
                hint="fix the entry's path, or restore the file",
            )
        if path.is_dir():
            raise InputError(
                f"data entry {entry.name!r} is a folder",
                path=str(path),
                loc=("data", i, "path"),
                expected="one data file per split",
                observed="a folder",
                hint="point the entry at one file (JSONL, CSV, ...) per split",
            )
        split = Split(entry.name, entry.role, path, entry.format, entry.sealed, tuple(fields))
        out.append(split)
    names = [s.name for s in out]
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
    return out
