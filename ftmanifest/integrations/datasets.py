"""Load a pinned data entry through ``datasets``, and trace a Trainer's dataset to pinned entries.

Layer: edges - edge (integrations): hashes, copies and loads files.  ``datasets`` and
pyarrow are imported inside the functions only.  What is judged is the data as the
Trainer reads it.

Why: ``datasets`` keys a local file's Arrow cache by its path and mtime
(``data_files.py`` ``_get_single_origin_metadata``: ``mtime`` is the origin
metadata hashed into the builder's ``config_id``, ``builder.py``
``create_config_id``), and reuses a folder that holds ``dataset_info.json``
(``builder.py`` ``download_and_prepare``).  Bytes changed with the mtime kept
(``cp -p``, ``rsync -a``, ``tar x``) are served from the stale cache.

``load_pinned_dataset(M, NAME)`` hashes the entry (``observe.hash_path``,
as ``verify`` does), copies it into a private folder named after the pinned
digest (``<cache>/datasets/{file|tree}-sha256-<hex>/files``), verifies the
copy, and loads *the copy* with ``cache_dir`` in that same folder: a file
swapped after hashing is never read, and two digests never share a cache.  It
stamps the Arrow files it has just built (their digests), under a lock per
digest; a folder found changed or unstamped is built again.  Cost, the first
time per digest: a copy of the entry (its size on disk, in the 0700 cache),
a hash of the copy and one parse; afterwards a ``stat`` per file.

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

import dataclasses
import itertools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.errors import FtManifestError, InputError, RefusedError, UsageError
from ftmanifest.findings import Finding
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest.renamed import renamed_keywords

if TYPE_CHECKING:
    from ftmanifest.manifest.data import DataEntry
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.snapshot import FileState

ORIGIN_RULE = "drift.data-origin"  # read from a file that is no pinned entry of the role
CACHE_RULE = "drift.data-cache"  # the Arrow cache does not hold the pinned bytes
UNTRACED_RULE = "drift.data-untraced"  # no files to trace (torch Dataset, generator...)
DIGEST_RULE = "drift.data"  # the same rule verify uses for a data entry's digest
STAMP = "ftmanifest-stamp.json"
# format -> (datasets builder, builder options)
BUILDERS: dict[str, tuple[str, dict[str, str]]] = {
    "jsonl": ("json", {}), "ndjson": ("json", {}), "json": ("json", {}), "csv": ("csv", {}),
    "tsv": ("csv", {"sep": "\t"}), "parquet": ("parquet", {}), "text": ("text", {}),
    "txt": ("text", {}),
}  # fmt: skip
_CHOSEN_BY_THE_MANIFEST = (
    "path", "data_dir", "data_files", "split", "cache_dir", "revision", "download_mode",
    "download_config", "streaming", "keep_in_memory", "storage_options",
)  # fmt: skip
_MAX_CANDIDATES = 256  # builder folders computed per Arrow folder (about 4 ms each)


class DataDigestError(RefusedError):
    """A data entry's bytes are not the ones the manifest pins (``findings`` has the row)."""

    reason = "data-digest-differs"


@dataclass(frozen=True)
class DataTrace:
    """What ``trace_dataset`` found: drift rows (errors), warnings, and the run record's part."""

    traced: bool  # the dataset's origin files are known
    findings: list[Finding]
    record: dict[str, Any]  # JSON-able: kind, origins, cache files, reason when not traced


@renamed_keywords(manifest_path="manifest")
def load_pinned_dataset(
    manifest: str | Path, name: str, *, allow_outside: bool = False, **kwargs: Any
) -> Any:
    """The data entry ``name`` as a ``datasets.Dataset``, read from its verified pinned bytes.

    ``kwargs`` go to ``datasets.load_dataset`` (``features=``, ``num_proc=``,
    builder options); the builder, files, split and cache come from the
    manifest.  Raises ``DataDigestError`` when the bytes are not the pinned ones.
    """
    from ftmanifest.integrations.pinned import refuse_chosen

    hint = "drop it; to load other data, pin it as a data entry and re-lock the manifest"
    refuse_chosen(kwargs, _CHOSEN_BY_THE_MANIFEST, "load_pinned_dataset", hint)
    ctx = _Context.open(manifest, "train", allow_outside)
    names = [e.name for e in ctx.manifest.data]
    if name not in names:
        raise UsageError(
            f"the manifest has no data entry named {name!r}",
            path=str(ctx.path),
            field="data[].name",
            expected=", ".join(map(repr, names)) or "no data entries",
            observed=repr(name),
            hint="pass the name of one of the manifest's data entries",
        )
    return ctx.load(names.index(name), kwargs)


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


# --- the manifest's side ------------------------------------------------------


_Part = tuple[int, "str | None"]  # an entry, and one file inside it when it is a folder


@dataclass(frozen=True)
class _Staged:
    """An entry's verified private copy, and how ``datasets`` loads it."""

    home: Path  # the digest's folder: files/ (the copy), hf/ (datasets' cache_dir)
    digest: str
    files: list[Path]
    builder: str
    options: dict[str, str]


@dataclass
class _Context:
    path: Path
    manifest: Manifest
    role: str
    allow_outside: bool
    references: dict[_Part, Any] = field(default_factory=dict)  # -> pa.Table or the error

    @classmethod
    def open(cls, manifest_path: str | Path, role: str, allow_outside: bool) -> _Context:
        from ftmanifest.manifest import load_manifest

        path = Path(manifest_path)
        return cls(path, load_manifest(path).manifest, role, allow_outside)

    @property
    def use_cache(self) -> bool:
        return self.manifest.security.rehash != "always"

    def entry(self, i: int) -> DataEntry:
        return self.manifest.data[i]

    def source(self, i: int) -> Path | None:
        from ftmanifest.fsutil import locate

        entry = self.entry(i)
        return locate(self.path.parent, entry.path, ("data", i, "path"), self.allow_outside)[0]

    def builder(self, i: int, src: Path) -> tuple[str, dict[str, str]] | None:
        from ftmanifest.counts import format_of
        from ftmanifest.verify.observe import folder_format

        entry = self.entry(i)
        if src.is_dir():
            from ftmanifest.fsutil import path_bound
            from ftmanifest.hashing.walk import list_tree

            fmt = folder_format(
                entry.format, list_tree(src, symlink_root=path_bound(self.path.parent))
            )
        else:
            fmt = format_of(src, entry.format)
        return BUILDERS.get(fmt or "")

    def stage(self, i: int) -> _Staged:
        """Verify entry ``i`` and copy it into its digest's private folder."""
        from ftmanifest.fsutil import resolve_inside
        from ftmanifest.verify.observe import hash_path

        entry, loc = self.entry(i), ("data", i)
        if entry.digest is None:
            raise InputError(
                f"data {entry.name!r} pins no digest",
                path=str(self.path),
                loc=(*loc, "digest"),
                expected="a pinned digest (sha256:...)",
                observed="absent",
                hint=f"pin it: ftmanifest lock {self.path}",
            )
        base = self.path.parent
        src = resolve_inside(base, entry.path, (*loc, "path"), self.allow_outside)
        self._check(i, hash_path(src, base, use_cache=self.use_cache), "the file")
        found = self.builder(i, src)
        if found is None:
            raise InputError(
                f"data {entry.name!r} is in no format datasets loads here",
                path=str(self.path),
                loc=(*loc, "format"),
                expected=", ".join(sorted(BUILDERS)),
                observed=entry.format or src.name,
                hint="set data[].format, or load the entry with your own code",
            )
        home = _home(entry.digest, src.is_dir())
        copy = home / "files"
        if not copy.is_dir():
            _copy_in(src, base, home)
        target = copy if src.is_dir() else copy / src.name
        state = hash_path(target, home, use_cache=self.use_cache)
        if state.digest != entry.digest:
            shutil.rmtree(copy, ignore_errors=True)  # a cache that lies is deleted, never read
        again = f"run again: the copy in {home} is made afresh from the verified file"
        self._check(i, state, "ftmanifest's private copy (now deleted)", again)
        return _Staged(home, entry.digest, _files_of(target, found), *found)

    def _check(self, i: int, state: FileState, what: str, hint: str | None = None) -> None:
        entry = self.entry(i)
        if state.error is None and state.digest == entry.digest:
            return
        observed = state.error or str(state.digest)
        row = Finding.at(
            ("data", i, "digest"),
            kind="drift",
            rule=DIGEST_RULE,
            message=f"data {entry.name!r}: {what} does not hold the pinned bytes",
            path=str(self.path),
            expected=entry.digest,
            observed=observed,
            hint=hint
            or f"restore {entry.path} (a backup, git checkout), or re-lock after review: "
            f"ftmanifest lock {self.path}",
        )
        raise DataDigestError(
            row.message,
            path=row.path,
            loc=row.loc,
            expected=row.expected,
            observed=observed,
            hint=row.hint,
            findings=[row],
        )

    def load(self, i: int, kwargs: dict[str, Any], part: str | None = None) -> Any:
        """Entry ``i`` (only its file ``part`` when given) from its verified private copy."""
        staged = self.stage(i)
        if part is not None:
            files = [
                f for f in staged.files if f.relative_to(staged.home / "files").as_posix() == part
            ]
            staged = dataclasses.replace(staged, files=files)
        from filelock import FileLock  # a dependency of datasets

        with FileLock(str(staged.home / "load.lock")):  # ranks: one builds and stamps
            built = {p.parent for p in staged.home.glob("hf/*/*/*/*/dataset_info.json")}
            loaded = self._load(i, staged, kwargs)
            folder = Path(loaded.cache_files[0]["filename"]).parent
            if not _stamp(loaded, staged.digest, fresh=folder not in built):
                shutil.rmtree(folder, ignore_errors=True)  # changed or unstamped: built again
                loaded = self._load(i, staged, kwargs)
                _stamp(loaded, staged.digest, fresh=True)
        return loaded

    def _load(self, i: int, staged: _Staged, kwargs: dict[str, Any]) -> Any:
        import datasets
        from datasets.exceptions import DatasetsError

        try:
            return datasets.load_dataset(
                staged.builder,
                data_files=[str(f) for f in staged.files],
                split="train",
                cache_dir=str(staged.home / "hf"),
                **{**staged.options, **kwargs},
            )
        except (DatasetsError, ValueError, OSError, TypeError, KeyError) as exc:
            raise InputError(
                f"datasets cannot load data {self.entry(i).name!r}",
                path=str(self.path),
                loc=("data", i, "format"),
                expected=f"{staged.builder} records",
                observed=f"{type(exc).__name__}: {exc}"[:300],
                hint="check the entry's format and the file",
            ) from exc

    def reference(self, key: _Part) -> Any:
        """The Arrow table of a default load of an entry's verified bytes (or the error)."""
        if key not in self.references:
            try:
                self.references[key] = self.load(key[0], {}, key[1]).data.table
            except FtManifestError as exc:
                self.references[key] = exc
        return self.references[key]

    def candidates(self) -> list[tuple[_Part, list[str]]]:
        """Every entry's files as ``load_dataset`` would get them, and each file of a folder."""
        out: list[tuple[_Part, list[str]]] = []
        for i in range(len(self.manifest.data)):
            files, src = self.candidate_files(i), self.source(i)
            if files is None or src is None:
                continue
            out.append(((i, None), files))
            if src.is_dir() and len(files) > 1:
                top = os.path.abspath(src)
                out += [((i, Path(f).relative_to(top).as_posix()), [f]) for f in files]
        return out

    def candidate_files(self, i: int) -> list[str] | None:
        """The absolute paths ``load_dataset(data_files=...)`` would be given for entry ``i``."""
        src = self.source(i)
        try:
            found = self.builder(i, src) if src is not None else None
            if src is None or found is None:
                return None
            return [os.path.abspath(f) for f in _files_of(src, found)]
        except FtManifestError:  # a folder that cannot be listed: not a candidate
            return None

    def row(
        self,
        rule: str,
        loc: Loc,
        message: str,
        observed: str,
        expected: str | None = None,
        *,
        hint: str | None = None,
        severity: str = "error",
    ) -> Finding:
        """A drift row about this manifest; expected: the role's entries, fix: load them pinned."""
        return Finding.at(
            loc,
            kind="drift",
            rule=rule,
            message=message,
            path=str(self.path),
            expected=expected or self.of_role(),
            observed=observed,
            hint=hint or self.load_hint(),
            severity=severity,
        )

    def entry_record(self, i: int) -> dict[str, Any]:
        e = self.entry(i)
        return {"name": e.name, "field": format_loc(("data", i)), "path": e.path,
                "digest": e.digest, "role": e.role}  # fmt: skip

    def load_hint(self, name: str | None = None) -> str:
        mine = [e.name for e in self.manifest.data if e.role == self.role]
        name = name or (mine[0] if len(mine) == 1 else "NAME")
        return (
            f"load it with ftmanifest.integrations.datasets.load_pinned_dataset("
            f"{str(self.path)!r}, {name!r}) (verified, cached by its digest)"
        )

    def of_role(self) -> str:
        mine = [
            f"data[{i}] {e.name!r} ({e.path})"
            for i, e in enumerate(self.manifest.data)
            if e.role == self.role
        ]
        return "a file of " + (", ".join(mine) if mine else f"a data entry of role {self.role}")


def _home(digest: str, tree: bool) -> Path:
    """``<cache>/datasets/{file|tree}-<algorithm>-<hex>``: private, one per pinned digest."""
    from ftmanifest.fsutil import write_error
    from ftmanifest.statcache import cache_dir

    algorithm, _, hexdigest = digest.partition(":")
    root = cache_dir() / "datasets"
    home = root / f"{'tree' if tree else 'file'}-{algorithm}-{hexdigest}"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        home.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, home, "cannot create the dataset cache") from None
    return home


def _copy_in(src: Path, base: Path, home: Path) -> None:
    """Copy ``src`` (a file or a folder's files) to ``home/files``, read-only, atomically."""
    from ftmanifest.counts import open_regular
    from ftmanifest.fsutil import path_bound, write_error
    from ftmanifest.hashing.digests import UnreadableFileError
    from ftmanifest.hashing.read import CHUNK_SIZE
    from ftmanifest.hashing.walk import list_tree

    def unreadable(p: Path, why: str) -> InputError:
        return UnreadableFileError(f"cannot read {p}: {why}", path=str(p), observed=why)

    listing = list_tree(src, symlink_root=path_bound(base)) if src.is_dir() else {src.name: src}
    tmp = Path(tempfile.mkdtemp(prefix=".copy-", dir=home))
    try:
        for rel, p in listing.items():
            dest = tmp.joinpath(*rel.split("/"))
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open_regular(p, unreadable) as fin, open(dest, "xb") as fout:
                shutil.copyfileobj(fin, fout, CHUNK_SIZE)
            os.chmod(dest, 0o400)
        try:
            os.rename(tmp, home / "files")
        except OSError:
            if not (home / "files").is_dir():  # else another process got there first
                raise
    except OSError as exc:
        raise write_error(exc, home / "files", "cannot copy the data") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _files_of(target: Path, found: tuple[str, dict[str, str]]) -> list[Path]:
    """A file, or a folder's files in the format's builder, sorted as the tree digest sorts."""
    from ftmanifest.counts import format_of
    from ftmanifest.hashing.walk import list_tree

    if not target.is_dir():
        return [target]
    return [p for p in list_tree(target).values() if BUILDERS.get(format_of(p)) == found]


def _split_files(folder: Path, info: Any, split: str) -> list[Path]:
    from datasets.naming import filenames_for_dataset_split

    shards = getattr(info.splits[split], "shard_lengths", None)
    names = filenames_for_dataset_split(str(folder), info.dataset_name, split, "arrow", shards)
    return [Path(n) for n in names]


def _stamp(loaded: Any, digest: str, *, fresh: bool) -> bool:
    """Stamp the Arrow files just built from the pinned copy; False: a folder that cannot be
    trusted (its stamp disagrees, or it was there before without one)."""
    from ftmanifest.fsutil import atomic_write_text
    from ftmanifest.hashing.files import hash_files

    folder = Path(loaded.cache_files[0]["filename"]).parent
    info = _info(folder)
    if info is None or "train" not in info.splits:
        return True  # not a builder folder: no stamp, and the trace refuses it
    files = _split_files(folder, info, "train")
    results = hash_files(files)
    arrow = {p.name: r.digest for p, r in results.items() if not isinstance(r, FtManifestError)}
    stamp = {"format": 1, "digest": digest, "split": "train", "arrow": arrow}
    old = _read_json(folder / STAMP)
    if old is None and fresh and len(arrow) == len(files):  # else no stamp: the trace refuses
        atomic_write_text(folder / STAMP, json.dumps(stamp, sort_keys=True))
    return old == stamp if old is not None else fresh


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _info(folder: Path) -> Any:
    """The ``DatasetInfo`` of a builder's folder, or None (``save_to_disk`` adds state.json)."""
    from datasets import DatasetInfo

    if not (folder / "dataset_info.json").is_file() or (folder / "state.json").exists():
        return None
    try:
        info = DatasetInfo.from_directory(str(folder))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return info if info.splits and info.dataset_name else None


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
