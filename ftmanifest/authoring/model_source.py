"""Source: a base model, as a folder or as ``repo@revision`` in the Hugging Face cache.

Layer: edges - authoring (reads the disk; the hub cache only through huggingface_hub's
own functions, offline, by ``hfcache.hub_snapshot``: nothing is downloaded).
A folder inside the cache (``models--org--name/snapshots/<commit>``) is named
by its repo and commit, any other folder by its path.  The model card's front
matter (``README.md``: ``license``, ``license_name``, ``license_link``, the
hub's documented model-card metadata) gives the licence when it states one.
"""

from __future__ import annotations

import os
from pathlib import Path

from ftmanifest.authoring.draft import Draft
from ftmanifest.hfcache import SnapshotNotFoundError, hub_snapshot
from ftmanifest.manifest.patterns import COMMIT_RE


def read_folder(path: Path, base: Path, draft: Draft) -> None:
    """A model folder: config.json beside the weights."""
    parts = path.resolve().parts
    source = path.name or str(path)
    if (
        len(parts) >= 3
        and parts[-2] == "snapshots"
        and parts[-3].startswith("models--")
        and COMMIT_RE.match(parts[-1])
    ):
        repo = parts[-3][len("models--") :].replace("--", "/")
        draft.put(("model", "repo"), repo, source, "the hub cache folder it lies in")
        draft.put(("model", "revision"), parts[-1], source, "the snapshot's commit")
    else:
        draft.put(("model", "path"), relative(path, base), str(path), "the folder")
    card(path, source, draft)


def read_ref(ref: str, draft: Draft, *, source: str | None = None, key: str = "repo") -> None:
    """``org/name@revision`` (or ``org/name``: its ``main``), looked up in the cache."""
    repo, _, revision = ref.partition("@")
    source = source or ref
    draft.put(("model", "repo"), repo, source, key)
    try:
        snap = hub_snapshot(repo, revision or None)
    except SnapshotNotFoundError as exc:
        draft.notes.append(
            f"{source}: {repo}@{revision or 'main'} is not in the local Hugging Face cache, so "
            f"its commit and files are not known here: {exc.hint}; then `ftmanifest lock` "
            "pins them"
        )
        if revision:
            draft.put(("model", "revision"), revision, source, f"{key} (as given)")
        return
    if snap.commit is not None:
        why = (
            "the cached snapshot"
            if COMMIT_RE.match(revision)
            else (f"refs/{revision or 'main'} in the hub cache")
        )
        draft.put(("model", "revision"), snap.commit, source, why)
    card(snap.folder, f"{repo}@{revision or 'main'}", draft)


def card(folder: Path, source: str, draft: Draft) -> None:
    """The licence in the model card's front matter, when it names one."""
    readme = folder / "README.md"
    meta = front_matter(readme)
    name = meta.get("license")
    if name == "other" and isinstance(meta.get("license_name"), str):
        draft.put(("model", "license"), meta["license_name"], f"{source}/README.md", "license_name")
    elif isinstance(name, str) and name:
        draft.put(("model", "license"), name, f"{source}/README.md", "license")
    link = meta.get("license_link")
    if isinstance(link, str) and link.startswith(("https://", "http://")):
        draft.put(("model", "terms_url"), link, f"{source}/README.md", "license_link")


def front_matter(readme: Path) -> dict[str, object]:
    """The YAML between the first two ``---`` lines of a model card, or {}."""
    try:
        with open(readme, "rb") as f:
            text = f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return {}
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        return {}
    import yaml

    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError:
        return {}
    return meta if isinstance(meta, dict) else {}


def relative(path: Path, base: Path) -> str:
    """``path`` as the manifest names it: relative to its folder, '/'-separated."""
    try:
        rel = os.path.relpath(path.resolve(), base.resolve())
    except ValueError:  # another drive (Windows)
        return path.resolve().as_posix()
    return Path(rel).as_posix()
