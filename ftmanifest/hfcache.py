"""Find a model snapshot in a local folder or in the Hugging Face cache.

Layer: file access (reads the disk).  The hub cache is read only through
huggingface_hub's own functions, offline (``local_files_only=True``): a
branch or tag is resolved through the cache's refs to its commit, and
nothing is ever downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

from ftmanifest.errors import InputError
from ftmanifest.manifest.patterns import COMMIT_RE as COMMIT_RE  # re-exported for callers

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack")


class SnapshotNotFoundError(InputError):
    """The wanted revision is not in the local cache."""


class Snapshot:
    """A model folder and, for the hub cache, its commit and repository folder."""

    __slots__ = ("folder", "commit", "symlink_root", "source")

    def __init__(self, folder: Path, commit: str | None, symlink_root: Path, source: str) -> None:
        self.folder = folder
        self.commit = commit
        self.symlink_root = symlink_root
        self.source = source


def hub_snapshot(
    repo_id: str, revision: str | None, cache_dir: str | Path | None = None
) -> Snapshot:
    """The cached snapshot of ``repo_id`` at ``revision`` (commit, branch or tag)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError as exc:  # a core dependency; only a broken install lacks it
        raise InputError(
            f"cannot read the Hugging Face cache for {repo_id}: huggingface_hub is not importable",
            loc=("model", "repo"),
            expected="huggingface_hub installed (a dependency of ftmanifest)",
            observed=_first_line(exc),
            hint="pip install 'huggingface-hub>=0.23' (or reinstall ftmanifest)",
        ) from None
    if cache_dir is None:
        cache_dir = current_cache_dir()
    wanted = revision or "main"
    try:
        folder = snapshot_download(
            repo_id,
            revision=wanted,
            cache_dir=str(cache_dir) if cache_dir is not None else None,
            local_files_only=True,
        )
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError, OSError) as exc:
        what = (
            f"revision {revision} of {repo_id}"
            if revision
            else f"{repo_id} (model.revision is empty, so its 'main' branch)"
        )
        raise SnapshotNotFoundError(
            f"{what} is not in the local Hugging Face cache",
            loc=("model", "revision"),
            expected=f"a cached snapshot of {repo_id}@{wanted}",
            observed=_first_line(exc),
            hint=f"download it: {download_command(repo_id, wanted)}"
            f" (with huggingface_hub older than 0.34: huggingface-cli download {repo_id}"
            f" --revision {wanted}), or set HF_HUB_CACHE to the cache that holds it",
        ) from None
    path = Path(folder)
    commit = path.name if COMMIT_RE.match(path.name) else None
    return Snapshot(path, commit, path.parent.parent, "hub-cache")


def branch_commit(snapshot_folder: Path, branch: str = "main") -> str | None:
    """The commit the cache's ``refs/<branch>`` names for the repository holding
    ``snapshot_folder`` (``models--org--name/snapshots/<commit>``), or None.

    What ``from_pretrained("org/name")`` loads offline is that commit's snapshot,
    whatever the manifest pins (issue 30).
    """
    from ftmanifest.untrusted import read_untrusted

    ref = Path(snapshot_folder).parent.parent / "refs" / branch
    try:
        text = read_untrusted(ref, limit=256, what="hub cache ref", hint="").decode("ascii")
    except (OSError, UnicodeDecodeError, InputError):
        return None
    text = text.strip()
    return text if COMMIT_RE.match(text) else None


def download_command(repo_id: str, revision: str) -> str:
    """The command that puts ``repo_id@revision`` into the cache (the ``hf`` CLI)."""
    return f"hf download {repo_id} --revision {revision}"


def current_cache_dir() -> str | None:
    """The hub cache the environment names now (huggingface_hub reads it only at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


def local_snapshot(folder: Path) -> Snapshot:
    if not folder.is_dir():
        raise SnapshotNotFoundError(
            "model folder does not exist",
            path=str(folder),
            loc=("model", "path"),
            expected="a folder with the model files",
            observed="absent",
            hint="fix model.path, or build/download the model there",
        )
    return Snapshot(folder, None, folder, "local")


def is_weight_file(relpath: str) -> bool:
    return relpath.lower().endswith(WEIGHT_SUFFIXES)


def _first_line(exc: BaseException, limit: int = 300) -> str:
    """The library's first sentence, whole; cut only at a word, and marked so."""
    text = " ".join(str(exc).split())
    if not text:
        return type(exc).__name__
    end = text.find(". ")
    sentence = text[: end + 1] if end >= 0 else text
    if len(sentence) <= limit:
        return sentence
    return sentence[:limit].rsplit(" ", 1)[0] + " …"


def cached_revisions(repo_id: str) -> list[tuple[str, int]]:
    """(commit, bytes on disk) of every snapshot of ``repo_id`` in the local cache,
    read through huggingface_hub's own cache scanner; empty when none."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    folder = current_cache_dir()
    try:
        info = scan_cache_dir(folder)
    except (CacheNotFound, OSError):
        return []
    out = []
    for repo in info.repos:
        if repo.repo_id == repo_id and repo.repo_type == "model":
            out += [(rev.commit_hash, int(rev.size_on_disk)) for rev in repo.revisions]
    return sorted(out)
