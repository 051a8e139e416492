"""Where a file of the observed interpreter lies, and so which rule judges it.

Layer: judging rooms (verify), private to ``verify.interpreter`` (whose module
doc lists the rules in order).  Paths are compared as ``probe.records.real_path``
gives them: folders resolved, so a venv's ``lib64`` and ``lib`` are one place.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ftmanifest.manifest.model import Manifest
from ftmanifest.probe.git import repository_root
from ftmanifest.probe.records import Distribution, RecordedFile, RecordIndex, real_path
from ftmanifest.verify._pinned_code import GITLINK, GitFailed, PinnedTree, pinned_tree

Rule = Literal["record", "repo", "unrecorded", "guard", "stdlib", "allowed", "outside"]
_SITE_NAMES = ("site-packages", "dist-packages")


@dataclass(frozen=True)
class Where:
    rule: Rule
    recorded: RecordedFile | None = None
    rel: str | None = None
    """Inside the repository: the path relative to its root."""
    folder: str | None = None
    """Inside a distributions' folder: that folder."""


def under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _first_under(path: str, folders: Iterable[str]) -> str | None:
    return next((f for f in folders if under(path, f)), None)


@dataclass
class Places:
    """The folders the rules know, resolved once per judgement."""

    stdlib: tuple[str, ...]
    stdlib_names: frozenset[str]
    site_folders: frozenset[str]
    dists: list[Distribution]
    repo_root: str | None = None
    """The training repository's root (whether or not its commit is pinned)."""
    tree: PinnedTree | None = None
    """The pinned commit's tree; None when no commit is pinned or git cannot list it."""
    tree_error: str | None = None
    guard_project: str | None = None
    """The project folder of ftmanifest's own editable install, if it is one."""
    guard_excluded: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    records: RecordIndex | None = None
    guard_used: bool = False
    _subtrees: dict[str, PinnedTree | str] = field(default_factory=dict)

    def place(self, path: str) -> Where:
        """Which rule judges ``path`` (a ``real_path``)."""
        recorded = self.records.get(path) if self.records is not None else None
        if recorded is not None:
            return Where("record", recorded=recorded)
        site = _first_under(path, self.site_folders)
        if self.tree is not None and self.in_repo(path) and site is None:
            assert self.repo_root is not None
            return Where("repo", rel=os.path.relpath(path, self.repo_root).replace(os.sep, "/"))
        if site is not None:
            return Where("allowed") if self.allowed(path) else Where("unrecorded", folder=site)
        guard = self.guard_project
        own = guard is not None and under(path, guard) and not self.in_repo(path)
        if own and _first_under(path, self.guard_excluded) is None:
            return Where("guard")
        folder = _first_under(path, self.stdlib)
        if folder is not None and not _in_site_packages(path[len(folder) :]):
            return Where("stdlib")
        return Where("allowed") if self.allowed(path) else Where("outside")

    def in_repo(self, path: str) -> bool:
        return self.repo_root is not None and under(path, self.repo_root)

    def allowed(self, path: str) -> bool:
        return _first_under(real_path(path), self.allow) is not None

    def outside_words(self, path: str) -> str:
        """Where an unjudged file lies, in the words a row uses."""
        if self.repo_root is None or not under(path, self.repo_root):
            return "outside the training repository, the installed distributions and the stdlib"
        if self.tree_error is not None:
            return "in the training repository; git cannot list its commit: " + self.tree_error
        return (
            "in the training repository, but the manifest pins no commit (environment.code.commit)"
        )

    def subtree(self, rel: str) -> tuple[PinnedTree, str] | str | None:
        """For a path inside a submodule: (the submodule's pinned tree, the path in it),
        or why it cannot be listed; None when ``rel`` is in no submodule."""
        assert self.tree is not None and self.repo_root is not None
        parts = rel.split("/")
        tree, root, depth = self.tree, self.repo_root, 0
        while depth < 8:
            for i in range(len(parts) - 1, 0, -1):
                entry = tree.entries.get("/".join(parts[:i]))
                if entry is not None and entry.mode == GITLINK:
                    break
            else:
                return (tree, "/".join(parts)) if depth else None
            sub_root = os.path.join(root, *parts[:i])
            key = f"{sub_root}@{entry.blob}"
            if key not in self._subtrees:
                try:
                    self._subtrees[key] = pinned_tree(sub_root, entry.blob)
                except GitFailed as exc:
                    self._subtrees[key] = f"submodule {'/'.join(parts[:i])}: {exc}"
            found = self._subtrees[key]
            if isinstance(found, str):
                return found
            tree, root, parts, depth = found, sub_root, parts[i:], depth + 1
        return "submodules nested too deep"


def _in_site_packages(rest: str) -> bool:
    return any(part in _SITE_NAMES for part in rest.split(os.sep))


def build_places(
    observation: Mapping[str, Any],
    manifest: Manifest,
    manifest_path: Path,
    dists: list[Distribution],
    *,
    code_dir: Path | None = None,
) -> Places:
    site = observation.get("site") or {}
    sites = list(site.get("site_packages") or [])
    if site.get("enable_user_site") and site.get("user_site"):
        sites.append(site["user_site"])
    sites += [d.folder for d in dists]
    site_folders = frozenset(real_path(s) for s in sites)
    places = Places(
        stdlib=tuple(real_path(p) for p in observation.get("stdlib") or []),
        stdlib_names=frozenset(observation.get("stdlib_module_names") or ()),
        site_folders=site_folders,
        dists=dists,
        allow=tuple(_allowed(manifest, manifest_path)),
    )
    _repository(places, manifest, code_dir or manifest_path.parent)
    places.guard_project = _guard_project(observation, dists)
    places.guard_excluded = tuple(
        real_path(str(observation.get(k) or "/")) for k in ("prefix", "base_prefix")
    ) + tuple(site_folders)
    return places


def _allowed(manifest: Manifest, manifest_path: Path) -> list[str]:
    policy = manifest.environment.interpreter
    if policy is None:
        return []
    base = manifest_path.parent
    return [real_path(os.path.join(base, os.path.expanduser(p))) for p in policy.allow_paths]


def _repository(places: Places, manifest: Manifest, folder: Path) -> None:
    root = repository_root(folder) if folder.is_dir() else None
    if root is None:
        return
    places.repo_root = real_path(str(root))
    commit = manifest.environment.code.commit
    if not commit:
        return
    try:
        places.tree = pinned_tree(places.repo_root, commit)
    except GitFailed as exc:
        places.tree_error = str(exc)


def _guard_project(observation: Mapping[str, Any], dists: list[Distribution]) -> str | None:
    """The editable project folder ftmanifest itself was imported from, if any: in the
    observed process, else (another interpreter, observed by ``run`` before it
    imported anything) the one this judge runs from, which is as trusted."""
    origin = next(
        (
            m.get("origin")
            for m in observation.get("modules") or []
            if m.get("name") == "ftmanifest"
        ),
        None,
    )
    if not isinstance(origin, str):
        origin = getattr(sys.modules.get("ftmanifest"), "__file__", None)
    if not isinstance(origin, str):
        return None
    package = real_path(os.path.dirname(origin))
    for dist in dists:
        if dist.editable is not None and under(package, real_path(dist.editable)):
            return real_path(dist.editable)
    return None
