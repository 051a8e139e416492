"""The model snapshot as found here: its files listed and hashed.

Layer: file access (hashing through the stat cache, the hub cache's layout).
``observe_model`` finds the manifest's model (a local folder, or the hub
snapshot of its pinned revision), lists its files (symlinks judged as the hub
lays them) and hashes each; ``ModelState`` holds what was found, or the error
that stopped it.  It judges nothing: verify's drift rows and the adapter's
base check both read the same state.

Beside the snapshot it notes the files a loader reads *instead of* the
snapshot's (``observe_side``): ``.no_exist`` markers in the hub cache, which
make huggingface_hub answer "not on the hub" for a file the snapshot has,
and the copies of remote code (``trust_remote_code``) in transformers'
modules cache, which transformers imports rather than the snapshot's file.
Both caches are the ones a process with the given environment reads
(``hfcache.hub_cache_dir`` / ``modules_cache_dir``).
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ftmanifest.errors import FtManifestError
from ftmanifest.fsutil import resolve_inside
from ftmanifest.hashing.digests import tree_digest
from ftmanifest.hashing.files import hash_files
from ftmanifest.hashing.walk import list_tree
from ftmanifest.hfcache import (
    Snapshot,
    hub_cache_path,
    hub_snapshot,
    legacy_transformers_cache,
    local_snapshot,
    modules_cache_dir,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from ftmanifest.hashing.digests import FileDigest
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.progress import ProgressSink
    from ftmanifest.treelist import ListDiff

    # a function with ``hashing.hash_files``'s signature (``distributed.shard``'s)
    Hasher = Callable[..., dict[Path, FileDigest | FtManifestError]]


@dataclass
class FileState:
    """A pinned file as found: its digest and size, or why it could not be read."""

    path: str
    digest: str | None = None
    size: int | None = None
    error: str | None = None
    records: int | None = None
    # a folder: its files as its tree digest covers them (relpath -> ``FileDigest``)
    tree: Mapping[str, FileDigest] | None = None
    # a folder whose digest differs from its pin: the files that differ, when the
    # pinned list is in the cache (``treelist``); else None
    differs: ListDiff | None = None


@dataclass(frozen=True)
class CodeCopy:
    """A file in transformers' modules cache that loading the model may import.

    ``role``: ``copy`` (the copy of snapshot file ``stands_for``), ``init`` (an
    ``__init__.py`` transformers creates empty; a package on the import path of
    the copies), ``shadow`` (an extension module or package named like a
    snapshot module, which Python's import finds before the ``.py`` copy).
    ``kept``: transformers imports it as it is.  It copies a missing file
    again; a model loaded by repo id never replaces an existing copy, one
    loaded from a folder replaces a copy whose size or mtime differ from the
    source's (``filecmp.cmp``, shallow).
    """

    path: str
    role: str
    stands_for: str | None = None
    digest: str | None = None
    size: int | None = None
    error: str | None = None
    kept: bool = True


@dataclass
class ModelState:
    folder: str | None = None
    commit: str | None = None
    source: str | None = None
    error: FtManifestError | None = None
    files: dict[str, FileState] = field(default_factory=dict)  # every file present
    tree_digest: str | None = None
    cache_dir: str | None = None  # the hub cache read (hub models), as huggingface_hub spells it
    # (variable, value): the cache transformers 4 reads instead of cache_dir, when one is set
    legacy_cache: tuple[str, str] | None = None
    no_exist: tuple[str, ...] = ()  # snapshot paths with a .no_exist/<commit>/ marker
    no_exist_dir: str | None = None  # that .no_exist/<commit> folder
    modules_dir: str | None = None  # transformers' modules cache (HF_MODULES_CACHE)
    code: tuple[CodeCopy, ...] = ()  # what a trust_remote_code load may import from it


def observe_model(
    manifest: Manifest,
    base: Path,
    *,
    use_cache: bool,
    allow_outside: bool,
    revision: str | None = None,
    progress: ProgressSink | None = None,
    settle: bool = False,
    hasher: Hasher | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelState:
    """Hash every file of the model snapshot (local folder or hub cache), in the
    caches a process with ``environ`` (default: this one's) reads, and note the
    files read instead of the snapshot's (``observe_side``)."""
    m = manifest.model
    state = ModelState()
    try:
        snap: Snapshot
        if m.path is not None:
            snap = local_snapshot(resolve_inside(base, m.path, ("model", "path"), allow_outside))
        else:
            assert m.repo is not None
            state.cache_dir = hub_cache_path(environ)
            snap = hub_snapshot(m.repo, revision or m.revision, state.cache_dir)
        state.folder, state.commit, state.source = str(snap.folder), snap.commit, snap.source
        listing = list_tree(snap.folder, symlink_root=snap.symlink_root)
    except FtManifestError as exc:
        state.error = exc
        return state
    results = (hasher or hash_files)(
        listing.values(), use_cache=use_cache, progress=progress, settle=settle
    )
    for rel, p in listing.items():
        result = results[p]
        if isinstance(result, FtManifestError):
            state.files[rel] = FileState(rel, error=result.message)
        else:
            state.files[rel] = FileState(rel, result.digest, result.size)
    if all(f.digest for f in state.files.values()):
        state.tree_digest = tree_digest({r: f.digest or "" for r, f in state.files.items()})
    return observe_side(state, manifest, environ, use_cache=use_cache)


def observe_side(
    state: ModelState,
    manifest: Manifest,
    environ: Mapping[str, str] | None = None,
    *,
    use_cache: bool = True,
) -> ModelState:
    """``state`` with the cache-side files a process with ``environ`` would read:
    the ``.no_exist`` markers of the snapshot's commit, the cache transformers 4
    reads instead, and the remote-code copies in the modules cache (only for a
    snapshot holding ``.py`` files).  ``run`` calls it again with the command's
    environment; the snapshot's own files are not read again."""
    if state.error is not None or state.folder is None:
        return state
    side: dict[str, object] = {}
    folder = Path(state.folder)
    if state.source == "hub-cache" and state.commit:
        marks = folder.parent.parent / ".no_exist" / state.commit
        side["no_exist_dir"] = str(marks)
        wanted = set(state.files) | {f.path for f in manifest.model.files}
        side["no_exist"] = tuple(_marked(marks, wanted))
        side["legacy_cache"] = legacy_transformers_cache(environ)
    modules = {p for p in state.files if p.endswith(".py") and "/" not in p}
    if modules:
        root = modules_cache_dir(environ)
        side["modules_dir"] = str(root)
        side["code"] = tuple(_code_copies(state, manifest, root, modules, use_cache))
    return replace(state, **side)  # type: ignore[arg-type]


def _marked(marks: Path, wanted: set[str]) -> Iterator[str]:
    """The files (the snapshot's and the pinned ones) that have a marker:
    huggingface_hub's ``try_to_load_from_cache`` checks ``os.path.isfile`` of the
    marker before it looks in the snapshot.  A marker for any other file says
    what an offline load finds anyway (no such file), and is left alone."""
    for rel in sorted(wanted):
        if os.path.isfile(marks / rel):
            yield rel


_HASH_FOLDER = re.compile(r"^[0-9a-f]{16}$")  # transformers 5: a folder load's source hash


def _module_name(name: str) -> str:
    """transformers' ``_sanitize_module_name`` (5.x); 4.x used the name as it is."""
    out = name.replace(".", "_dot_").replace("-", "_hyphen_")
    return f"_{out}" if out and out[0].isdigit() else out


def _code_copies(
    state: ModelState, manifest: Manifest, root: Path, modules: set[str], use_cache: bool
) -> list[CodeCopy]:
    top = root / "transformers_modules"
    inits = [root / "__init__.py", top / "__init__.py"]
    folders: list[tuple[Path, bool]] = []  # (copy folder, loaded by repo id)
    repo = manifest.model.repo if state.source == "hub-cache" else None
    if repo and state.commit:  # from_pretrained("org/name", revision=commit)
        for spell in (_module_name, str):
            parts = [spell(p) for p in repo.split("/")]
            inits += [top.joinpath(*parts[: i + 1], "__init__.py") for i in range(len(parts))]
            folders.append((top.joinpath(*parts, state.commit), True))
    names = {os.path.basename(os.path.normpath(state.folder or ""))}
    if manifest.model.path is not None:
        names.add(os.path.basename(os.path.normpath(manifest.model.path)))
    for name in sorted(n for n in names if n):  # from_pretrained(folder)
        for base in {top / _module_name(name), top / name}:
            inits.append(base / "__init__.py")
            folders.append((base, False))
            folders += [(base / d, False) for d in _listdir(base) if _HASH_FOLDER.match(d)]
    found: list[CodeCopy] = [CodeCopy(str(p), "init") for p in dict.fromkeys(inits)]
    for copy_folder, by_id in folders:
        found += _in_copy_folder(copy_folder, state, modules, by_id)
    unique: dict[str, CodeCopy] = {}
    for c in found:
        if c.path not in unique and os.path.lexists(c.path):
            unique[c.path] = c
    found = list(unique.values())
    digests = hash_files([Path(c.path) for c in found], use_cache=use_cache)
    out = []
    for c in found:
        got = digests[Path(c.path)]
        if isinstance(got, FtManifestError):
            out.append(replace(c, error=got.message))
        else:
            out.append(replace(c, digest=got.digest, size=got.size))
    return out


def _in_copy_folder(
    folder: Path, state: ModelState, modules: set[str], by_id: bool
) -> Iterator[CodeCopy]:
    yield CodeCopy(str(folder / "__init__.py"), "init")
    for init in _shadows(folder, "__init__"):
        yield CodeCopy(str(init), "shadow", "__init__.py")
    for rel in sorted(modules):
        copy = folder / rel
        if os.path.lexists(copy):
            kept = by_id or _same_signature(copy, Path(state.folder or "") / rel)
            yield CodeCopy(str(copy), "copy", rel, kept=kept)
        stem = rel[: -len(".py")]
        for other in _shadows(folder, stem):
            yield CodeCopy(str(other), "shadow", rel)
        for init in _shadows(folder / stem, "__init__", with_source=True):
            yield CodeCopy(str(init), "shadow", rel)


def _shadows(folder: Path, stem: str, *, with_source: bool = False) -> Iterator[Path]:
    """What Python's import finds for ``stem`` in ``folder`` before ``stem.py``: an
    extension module (``FileFinder`` tries those first); for a package folder
    named like a module (found before any module of that name), its ``__init__``
    in any form."""
    suffixes = list(importlib.machinery.EXTENSION_SUFFIXES)
    if with_source:
        suffixes += importlib.machinery.SOURCE_SUFFIXES + importlib.machinery.BYTECODE_SUFFIXES
    for suffix in suffixes:
        path = folder / (stem + suffix)
        if os.path.lexists(path):
            yield path


def _same_signature(a: Path, b: Path) -> bool:
    """``filecmp.cmp``'s shallow test: same type, size and mtime (links followed)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False

    def sig(st: os.stat_result) -> tuple[int, int, float]:
        return (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime)

    return sig(sa) == sig(sb)


def _listdir(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []
