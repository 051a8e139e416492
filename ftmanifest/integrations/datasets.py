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

``trace_dataset`` (``data_trace``) traces a Trainer's dataset back to these entries.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
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
