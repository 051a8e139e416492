"""The model snapshot as found here: its files listed and hashed.

Layer: file access (hashing through the stat cache, the hub cache's layout).
``observe_model`` finds the manifest's model (a local folder, or the hub
snapshot of its pinned revision), lists its files (symlinks judged as the hub
lays them) and hashes each; ``ModelState`` holds what was found, or the error
that stopped it.  It judges nothing: verify's drift rows and the adapter's
base check both read the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ftmanifest.errors import FtManifestError
from ftmanifest.fsutil import resolve_inside
from ftmanifest.hfcache import Snapshot, hub_snapshot, local_snapshot

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ftmanifest.hashing import FileDigest
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


@dataclass
class ModelState:
    folder: str | None = None
    commit: str | None = None
    source: str | None = None
    error: FtManifestError | None = None
    files: dict[str, FileState] = field(default_factory=dict)  # every file present
    tree_digest: str | None = None


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
) -> ModelState:
    """Hash every file of the model snapshot (local folder or hub cache)."""
    from ftmanifest.hashing import hash_files, list_tree, tree_digest

    m = manifest.model
    state = ModelState()
    try:
        snap: Snapshot
        if m.path is not None:
            snap = local_snapshot(resolve_inside(base, m.path, ("model", "path"), allow_outside))
        else:
            assert m.repo is not None
            snap = hub_snapshot(m.repo, revision or m.revision)
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
    return state
