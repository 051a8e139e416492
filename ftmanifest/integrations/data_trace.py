"""Trace a Trainer's dataset to the pinned data entries it was read from.

Layer: edges - edge (integrations): reads the dataset's Arrow files and the pinned
copies.  ``datasets`` and pyarrow are imported inside the functions only.  What flows
through here is the dataset as the Trainer holds it: its Arrow table's memory-mapped
blocks, traced back to builder folders and proved against the entries
``datasets.load_pinned_dataset`` stages; what it finds is drift rows and the run
record's part.

``trace_dataset`` walks the dataset's Arrow table: every block must be
memory-mapped from a file in a ``datasets`` builder folder (``cache-*.arrow``
written by ``.map``/``.filter`` sit beside the builder's own split files;
``select``/``shuffle`` only add an indices file).  ``datasets`` 5.2 keeps no
names of the source files (``info.download_checksums`` stays None:
``builder.py`` sets ``_record_checksums = False``), so the source is found by
recomputing, with ``datasets.load_dataset_builder``, the folder each pinned
entry (or one file of a pinned folder) would be cached in, and proved by
content:

* a folder under ftmanifest's cache: its stamp's Arrow digests must hold
  (a ``stat`` each, through the stat cache);
* any other folder: its split's Arrow table must equal a load of the verified
  pinned bytes (built once per digest in ftmanifest's cache, then
  memory-mapped).  Cost: reading both tables once per check, and the first time
  per digest a copy of the entry and one parse.  A folder found by path and
  mtime whose rows differ is a stale cache.

Not checked: rows that a ``.map`` function computed from elsewhere (code), a
``MemoryMappedTable`` built by hand around other rows (its path is taken),
and which split a derived ``cache-*.arrow`` came from (``Dataset.split`` is
taken; without one, every split of its folder counts).  A dataset loaded with
builder options (``features=``, ``sep=``) is proved only through
``load_pinned_dataset``.  Writes into ftmanifest's own cache folder (0700, the
same user) between its checks and the load are out of reach.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ftmanifest.errors import FtManifestError, UsageError
from ftmanifest.findings import Finding
from ftmanifest.integrations.datasets import (
    _MAX_CANDIDATES,
    BUILDERS,
    CACHE_RULE,
    ORIGIN_RULE,
    STAMP,
    UNTRACED_RULE,
    DataDigestError,
    DataTrace,
    _Context,
    _info,
    _Part,
    _read_json,
    _split_files,
)


def trace_dataset(
    dataset: Any, manifest_path: str | Path, role: str, *, allow_outside: bool = False
) -> DataTrace:
    """Trace ``dataset`` (a Trainer's ``train_dataset`` or ``eval_dataset``) to pinned entries.

    ``role``: ``"train"`` or ``"eval"``; an eval dataset may be a dict of them.
    """
    if role not in ("train", "eval"):
        raise UsageError(
            f"unknown dataset role {role!r}", field="role", expected="train or eval", observed=role
        )
    try:
        ctx = _Context.open(manifest_path, role, allow_outside)
    except FtManifestError as exc:
        row = Finding.at(
            ("data",),
            kind="drift",
            rule=ORIGIN_RULE,
            message="the manifest cannot be read, so the dataset cannot be judged",
            path=str(manifest_path),
            expected="a valid manifest",
            observed=exc.message,
            hint=exc.hint or "fix the manifest",
        )
        return DataTrace(False, [row], {"role": role, "traced": False, "reason": exc.message})
    if isinstance(dataset, Mapping) and role == "eval":
        parts = {str(k): _trace_one(ctx, v) for k, v in dataset.items()}
        return DataTrace(
            all(p.traced for p in parts.values()),
            [f for p in parts.values() for f in p.findings],
            {
                "role": role,
                "kind": "dict",
                "traced": all(p.traced for p in parts.values()),
                "parts": {k: p.record for k, p in parts.items()},
            },
        )
    return _trace_one(ctx, dataset)


# --- the dataset's side --------------------------------------------------------


def _trace_one(ctx: _Context, dataset: Any) -> DataTrace:
    # A ``datasets`` object exists only once ``datasets`` is imported: when it is not
    # (or not installed, as in an ``[ml]`` install), the dataset is something else,
    # a torch Dataset or a list, and is judged untraced without importing it.
    datasets = sys.modules.get("datasets")
    record: dict[str, Any] = {"role": ctx.role, "kind": _kind(dataset)}
    if datasets is None or not isinstance(dataset, datasets.Dataset):
        if dataset is None:
            why, record["kind"] = "no dataset was handed over to trace", "none"
        elif datasets is not None and isinstance(dataset, datasets.IterableDataset):
            why = "a streaming IterableDataset reads its files only as training goes"
        else:
            why = f"a {record['kind']} keeps no record of the files it was read from"
        return _untraced(ctx, record, why, [])
    files, in_memory = _blocks(dataset.data)
    record.update(
        rows=dataset.num_rows,
        fingerprint=getattr(dataset, "_fingerprint", None),
        cache_files=[c["filename"] for c in dataset.cache_files],
    )
    sources, lost = _sources(dataset, files)
    findings = [_lost_row(ctx, f) for f in lost]
    origins, traced_to = [], []
    for (folder, split), info in sources.items():
        entries, proof, rows = _judge(ctx, folder, info, split)
        traced_to += entries
        findings += rows or _role_rows(ctx, entries, folder)
        origins.append(
            {
                "cache": str(folder),
                "split": split,
                "proof": proof,
                "entries": [ctx.entry_record(j) for j in entries],
            }
        )
    record["origins"] = origins
    traced = not lost and not in_memory and all(o["entries"] for o in origins) and bool(files)
    if in_memory or not files:
        held = f"{in_memory} of its Arrow blocks are" if files else "its rows are"
        why = f"{held} held in memory (from_dict, from_list, add_column, keep_in_memory=True)"
        return _untraced(ctx, record, why, findings)
    if not traced:
        record["reason"] = "some of its files are not pinned data entries"
    elif not findings:  # traced: are all the pinned rows read, in the pinned order?
        from ftmanifest.integrations.data_rows import judge_rows

        pinned = sum(int(info.splits[s].num_examples) for (_, s), info in sources.items())
        findings, part = judge_rows(
            dataset, pinned, traced_to, ctx.manifest, str(ctx.path), ctx.role
        )
        record.update(part)
    return DataTrace(traced, findings, {**record, "traced": traced})


def _kind(dataset: Any) -> str:
    cls = type(dataset)
    return f"{cls.__module__.split('.')[0]}.{cls.__qualname__}"


def _blocks(table: Any) -> tuple[list[str], int]:
    """Memory-mapped Arrow files under a ``datasets`` table, and how many blocks are in memory."""
    from datasets.table import ConcatenationTable, MemoryMappedTable

    if isinstance(table, MemoryMappedTable):
        return [table.path], 0
    if isinstance(table, ConcatenationTable):
        files, in_memory = [], 0
        for block in itertools.chain.from_iterable(table.blocks):
            more, n = _blocks(block)
            files += more
            in_memory += n
        return list(dict.fromkeys(files)), in_memory
    return [], 1


def _sources(dataset: Any, files: list[str]) -> tuple[dict[tuple[Path, str], Any], list[str]]:
    """(builder folder, split) -> its ``DatasetInfo``, for every file; files in no builder folder.

    A builder's own split file names its split; a derived ``cache-*.arrow``
    sits in the folder of what it was derived from: the dataset's ``split``
    when that folder has it, else every split there.
    """
    out: dict[tuple[Path, str], Any] = {}
    lost: list[str] = []
    infos: dict[Path, Any] = {}
    claimed = str(dataset.split) if dataset.split is not None else None
    for name in files:
        folder = Path(name).parent
        info = infos[folder] if folder in infos else infos.setdefault(folder, _info(folder))
        if info is None:
            lost.append(name)
            continue
        own = {p: s for s in info.splits for p in _split_files(folder, info, str(s))}
        split = own.get(Path(name))
        splits = [split] if split else [claimed] if claimed in info.splits else list(info.splits)
        for s in splits:
            out[(folder, str(s))] = info
    return out, lost


def _judge(
    ctx: _Context, folder: Path, info: Any, split: str
) -> tuple[list[int], str, list[Finding]]:
    """The pinned entries an Arrow split was built from, how that was proved, or the rows."""
    stamped = _stamped(ctx, folder, info, split)
    if stamped is not None:
        return stamped
    table, why = _split_table(folder, info, split)
    if table is None:
        message = (
            f"the Arrow files of the {ctx.role} dataset cannot be read, so it cannot be judged"
        )
        return (
            [],
            "",
            [ctx.row(ORIGIN_RULE, ("data",), message, why, f"the split files in {folder}")],
        )
    key = _identify(ctx, folder, info).get(split)
    if key is not None:
        j, ref = key[0], ctx.reference(key)
        if isinstance(ref, FtManifestError):
            return [j], "", [_error_row(ctx, ref)]
        if ref.equals(table):
            return [j], "path and mtime, then content", []
        return [j], "", [_stale_row(ctx, j, folder, split, table.num_rows, ref.num_rows)]
    same = [i for i in range(len(ctx.manifest.data)) if _same_rows(ctx, i, table)]
    if same:
        return same, "content", []
    return [], "", [_unpinned_row(ctx, folder, split, table.num_rows, _guess(ctx, folder, info))]


def _stamped(
    ctx: _Context, folder: Path, info: Any, split: str
) -> tuple[list[int], str, list[Finding]] | None:
    """A folder ``load_pinned_dataset`` built: its stamp must still hold (None: not one)."""
    from ftmanifest.hashing.files import hash_files
    from ftmanifest.statcache import cache_dir

    try:
        key = folder.relative_to(cache_dir() / "datasets").parts[0]
    except (ValueError, IndexError):
        return None
    algorithm, _, hexdigest = key.partition("-")[2].partition("-")
    digest = f"{algorithm}:{hexdigest}"
    stamp = _read_json(folder / STAMP)
    if not isinstance(stamp, dict) or not isinstance(stamp.get("arrow"), dict):
        stamp = {"arrow": {}}  # no stamp: nothing here is proved (never by itself)
    files = _split_files(folder, info, split)
    seen = hash_files(files, use_cache=ctx.use_cache)
    changed = [
        p.name
        for p in files
        if isinstance(seen[p], FtManifestError)
        or getattr(seen[p], "digest", None) != stamp["arrow"].get(p.name)
    ]
    if changed or stamp.get("digest") != digest or stamp.get("split") != split:
        message = f"the Arrow cache in {folder} changed since load_pinned_dataset built it"
        observed = ", ".join(changed) or "no stamp, or another digest's"
        hint = f"load the entry again with load_pinned_dataset (it builds {folder} again)"
        expected = f"the Arrow files stamped for {digest}"
        return [], "", [ctx.row(CACHE_RULE, ("data",), message, observed, expected, hint=hint)]
    entries = [i for i, e in enumerate(ctx.manifest.data) if e.digest == digest]
    if not entries:
        message = f"the {ctx.role} dataset holds bytes ({digest}) that no data entry pins now"
        observed = f"{digest} (loaded by load_pinned_dataset; re-locked since?)"
        return [], "", [ctx.row(ORIGIN_RULE, ("data",), message, observed)]
    return entries, "stamp", []


def _split_table(folder: Path, info: Any, split: str) -> tuple[Any, str]:
    import pyarrow as pa
    from datasets.table import MemoryMappedTable

    try:
        tables = [
            MemoryMappedTable.from_file(str(p)).table for p in _split_files(folder, info, split)
        ]
        return pa.concat_tables(tables), ""
    except (OSError, ValueError, pa.ArrowException) as exc:
        return None, f"{type(exc).__name__}: {exc}"[:300]


def _same_rows(ctx: _Context, i: int, table: Any) -> bool:
    """Entry ``i``'s pinned bytes load to exactly ``table`` (a record count that differs: no)."""
    entry = ctx.entry(i)
    src = ctx.source(i)
    found = ctx.builder(i, src) if src is not None and entry.digest else None
    if found is None:
        return False
    if entry.records is not None and found[0] != "text" and entry.records != table.num_rows:
        return False
    ref = ctx.reference((i, None))
    return not isinstance(ref, FtManifestError) and bool(ref.equals(table))


def _identify(ctx: _Context, folder: Path, info: Any) -> dict[str, _Part]:
    """split -> entry (or a file in it) whose paths and mtimes ``datasets`` caches in ``folder``."""
    splits = [str(s) for s in info.splits]
    candidates = ctx.candidates()
    if not candidates or len(candidates) ** len(splits) > _MAX_CANDIDATES:
        return {}
    combos = itertools.product(candidates, repeat=len(splits))
    found = _first_match(folder, info, (
        (tuple(key for key, _ in combo), dict(zip(splits, (f for _, f in combo), strict=True)))
        for combo in combos
    ))  # fmt: skip
    return dict(zip(splits, found, strict=True)) if found is not None else {}


def _guess(ctx: _Context, folder: Path, info: Any) -> str | None:
    """The unpinned file under the manifest's folder that ``folder`` caches, if one is found."""
    from ftmanifest.counts import format_of

    if len(info.splits) != 1:
        return None
    pinned = {f for i in range(len(ctx.manifest.data)) for f in ctx.candidate_files(i) or []}
    names: list[str] = []
    seen = 0
    for top, dirs, files in os.walk(ctx.path.parent):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        names += [os.path.join(top, n) for n in sorted(files) if format_of(Path(n)) in BUILDERS]
        seen += len(files) + len(dirs)
        if len(names) >= _MAX_CANDIDATES or seen > 100 * _MAX_CANDIDATES:
            break  # a name is a courtesy: a walk never costs more than a few ms
    split = str(next(iter(info.splits)))
    todo = (
        (n, {split: [n]}) for n in map(os.path.abspath, names[:_MAX_CANDIDATES]) if n not in pinned
    )
    return _first_match(folder, info, todo)


def _first_match(folder: Path, info: Any, candidates: Any) -> Any:
    """The key of the first ``(key, data_files)`` that ``datasets`` would cache in ``folder``.

    Computed by ``datasets.load_dataset_builder`` itself, over a throwaway
    cache root (it creates lock files there), compared below the root.
    """
    import datasets
    from datasets.exceptions import DatasetsError

    if info.builder_name not in {b for b, _ in BUILDERS.values()} or len(folder.parents) < 4:
        return None
    want = folder.relative_to(folder.parents[3])
    with tempfile.TemporaryDirectory(prefix="ftmanifest-trace-") as tmp:
        for key, data_files in candidates:
            try:
                built = datasets.load_dataset_builder(
                    info.builder_name, data_files=data_files, cache_dir=tmp
                )
                if Path(built.cache_dir).relative_to(tmp) == want:
                    return key
            except (DatasetsError, OSError, ValueError):  # a file gone since: not this one
                continue
    return None


# --- rows ----------------------------------------------------------------------


def _role_rows(ctx: _Context, entries: list[int], folder: Path) -> list[Finding]:
    if not entries or any(ctx.entry(i).role == ctx.role for i in entries):
        return []
    i, e = entries[0], ctx.entry(entries[0])
    role = e.role or "none"
    message = f"the {ctx.role} dataset was read from data {e.name!r}, an entry of role {role}"
    observed = f"{e.path} (role {role}; Arrow cache {folder})"
    hint = f"hand the Trainer {ctx.of_role()}: {ctx.load_hint()}"
    return [ctx.row(ORIGIN_RULE, ("data", i, "role"), message, observed, hint=hint)]


def _stale_row(ctx: _Context, i: int, folder: Path, split: str, have: int, want: int) -> Finding:
    e = ctx.entry(i)
    message = (
        f"the Arrow cache of data {e.name!r} predates its pinned bytes: datasets keys a local "
        "file's cache by path and mtime, and served rows the pinned file does not hold"
    )
    observed = f"{folder} split {split}: {have} rows, not those of the pinned bytes"
    expected = f"the rows of {e.path} at {e.digest} ({want} rows)"
    hint = ctx.load_hint(e.name)
    return ctx.row(CACHE_RULE, ("data", i, "digest"), message, observed, expected, hint=hint)


def _unpinned_row(ctx: _Context, folder: Path, split: str, rows: int, named: str | None) -> Finding:
    observed = f"{named} (Arrow cache {folder})"
    if named is None:
        observed = (
            f"unknown files (Arrow cache {folder}, split {split}, {rows} rows): datasets keeps "
            "no names of its source files, and these match no pinned entry by path and mtime "
            "or by content"
        )
    message = f"the {ctx.role} dataset was read from a file the manifest does not pin"
    hint = (
        f"pin the file as a data entry of role {ctx.role} (then ftmanifest lock {ctx.path}), "
        f"or {ctx.load_hint()}"
    )
    return ctx.row(ORIGIN_RULE, ("data",), message, observed, hint=hint)


def _lost_row(ctx: _Context, name: str) -> Finding:
    if not os.path.exists(name):
        message = f"the {ctx.role} dataset reads an Arrow file that is gone, so it cannot be judged"
        return ctx.row(ORIGIN_RULE, ("data",), message, f"{name} (not found)")
    message = (
        f"the {ctx.role} dataset reads an Arrow file outside any datasets builder folder "
        "(save_to_disk, Dataset.from_file, map(cache_file_name=...), datasets.disable_caching()"
        "): its source is unknown"
    )
    hint = f"{ctx.load_hint()}, and .map it with datasets' caching on, no cache_file_name"
    return ctx.row(ORIGIN_RULE, ("data",), message, name, hint=hint)


def _error_row(ctx: _Context, exc: FtManifestError) -> Finding:
    if isinstance(exc, DataDigestError):
        return exc.findings[0]
    message = f"the {ctx.role} dataset cannot be proved to hold pinned bytes: {exc.message}"
    observed = exc.observed or exc.message
    return ctx.row(
        ORIGIN_RULE, exc.loc or ("data",), message, observed, exc.expected, hint=exc.hint
    )


def _untraced(ctx: _Context, record: dict[str, Any], why: str, rows: list[Finding]) -> DataTrace:
    required = ctx.manifest.security.require_traced_data
    message = f"the {ctx.role} dataset cannot be traced to pinned files: {why}"
    hint = ctx.load_hint() + ("" if required else "; security.require_traced_data: true refuses it")
    row = ctx.row(
        UNTRACED_RULE,
        ("security", "require_traced_data"),
        message,
        record["kind"],
        "a datasets.Dataset read from pinned data entries",
        hint=hint,
        severity="error" if required else "warning",
    )
    return DataTrace(False, [*rows, row], {**record, "traced": False, "reason": why})
