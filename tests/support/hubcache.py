"""A Hugging Face hub cache laid out on disk, with made-up commits.

Layer: tests (support).  The tests that resolve ``hub:`` model references
build their cache with this: blobs named by the etag the hub serves,
snapshots of relative symlinks into them, and ``refs/<branch>`` files, exactly
as huggingface_hub lays them out.  Nothing here touches the network.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from ftmanifest.errors import InputError, UsageError

_SIZE_PREFIXES = ("model.safetensors", "pytorch_model", "tf_model", "flax_model")


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob: the etag the hub serves for non-LFS files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def hub_etag(relpath: str, data: bytes) -> str:
    """sha256 for LFS-stored weight files, git blob sha1 for the small ones."""
    name = relpath.rsplit("/", 1)[-1]
    if name.startswith(_SIZE_PREFIXES) or name.endswith((".safetensors", ".bin", ".pt", ".gguf")):
        return hashlib.sha256(data).hexdigest()
    return git_blob_sha1(data)


def commit_id(files: Mapping[str, bytes], revision: str) -> str:
    """A deterministic 40-hex commit id over a snapshot's files and its name."""
    h = hashlib.sha1(f"ftmanifest-example\0{revision}\0".encode())
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return h.hexdigest()


def _snapshot_files(source: Path) -> dict[str, bytes]:
    if not source.is_dir():
        raise InputError("a snapshot source must be a folder", path=str(source))
    return {
        p.relative_to(source).as_posix(): p.read_bytes()
        for p in sorted(source.rglob("*"))
        if p.is_file()
    }


def build_hub_cache(
    cache_dir: Path,
    repo_id: str,
    snapshots: Mapping[str, Path],
    refs: Mapping[str, str],
) -> dict[str, str]:
    """Lay out ``repo_id`` in a hub cache, one snapshot per entry of ``snapshots``.

    ``snapshots`` maps a revision name (``"v1"``, ``"main"``) to a model folder;
    each becomes ``snapshots/<commit>/`` whose files are relative symlinks into
    ``../../blobs/<etag>`` (blobs shared between commits when equal), as
    huggingface_hub's ``_create_symlink`` writes them.  ``refs`` maps a branch
    name to a revision name of ``snapshots`` (or a 40-hex commit) and is
    written to ``refs/<branch>``.  Returns {revision name -> commit}, refs
    included.
    """
    if repo_id.count("/") != 1:
        raise UsageError("a hub repo id is 'org/name'", field="repo_id", observed=repo_id)
    repo = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    blobs = repo / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    commits: dict[str, str] = {}
    for revision, source in snapshots.items():
        files = _snapshot_files(Path(source))
        commit = commit_id(files, revision)
        snap = repo / "snapshots" / commit
        if snap.exists():
            shutil.rmtree(snap)
        for rel, data in files.items():
            blob = blobs / hub_etag(rel, data)
            if not blob.exists():
                blob.write_bytes(data)
            link = snap / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.relpath(blob, link.parent), link)
        commits[revision] = commit
    for branch, target in refs.items():
        commit = commits.get(target, target)
        if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
            raise UsageError(
                f"ref {branch!r} points at neither a snapshot nor a commit",
                field=f"refs.{branch}",
                expected="a key of snapshots or a 40-hex commit",
                observed=target,
            )
        ref = repo / "refs" / branch
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)  # no newline, as huggingface_hub writes it
        commits[branch] = commit
    return commits
