"""Trace the model a Trainer was handed back to the snapshot its manifest pins.

Layer: edges - drift (judging), with the few disk reads it needs.  ``verify`` checks the
files the manifest pins; this module checks that the *loaded model* came from
them: with the hub cache's ``refs/main`` moved,
``from_pretrained(repo)`` loads another commit while every pinned file still
verifies.  No torch or transformers import: the Trainer guard reads
``config._name_or_path`` (and ``config._commit_hash`` where transformers still
sets it) off the model and passes plain values in.

Rules (``judge_origin``; every refusal is a ``drift`` row naming both sides):

* no origin (a model built from a config in memory) is refused;
* a ``_commit_hash`` other than the pinned ``model.revision`` is refused;
* a folder must resolve (symlinks followed) to the pinned folder: the local
  ``model.path``, or the hub-cache snapshot folder of the pinned commit;
* a repo id must be the manifest's ``model.repo``, and the commit it was loaded
  at must be the pinned one: ``_commit_hash`` when set, else the commit that
  ``refs/main`` points at in the hub cache now (transformers loads ``main``
  when given no revision and records no commit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.errors import FtManifestError, InputError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import resolve_inside
from ftmanifest.hfcache import COMMIT_RE, Snapshot, hub_snapshot, local_snapshot
from ftmanifest.location import Loc

if TYPE_CHECKING:
    from ftmanifest.manifest.environment import ModelSource

ORIGIN_RULE = "drift.model-origin"
WEIGHTS_RULE = "drift.model-weights"
# A hub repo id as huggingface_hub accepts it: [org/]name, no "--" or "..".
_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]{1,96}$")


@dataclass(frozen=True)
class Pinned:
    """What the manifest pins: a hub commit, or a local folder."""

    manifest: str  # the manifest's path, for the hint
    repo: str | None
    commit: str | None  # 40-hex, only when the manifest pins one
    folder: Path | None  # resolved; None when the pinned snapshot is not here

    @property
    def loc(self) -> Loc:
        return ("model", "revision") if self.repo is not None else ("model", "path")

    def label(self) -> str:
        if self.repo is not None:
            where = f" ({self.folder})" if self.folder is not None else " (not in the cache)"
            return f"{self.repo}@{self.commit or 'no pinned commit'}{where}"
        return str(self.folder) if self.folder is not None else "model.path (not here)"


@dataclass(frozen=True)
class Origin:
    """Where a loaded model says it came from, read against this machine."""

    name_or_path: str  # as transformers recorded it; "" when none
    commit_hash: str | None = None  # config._commit_hash, when transformers set it
    folder: Path | None = None  # resolved, when name_or_path is a path
    repo: str | None = None  # when name_or_path is a hub repo id
    ref_commit: str | None = None  # where that repo's refs/main points in the cache now
    snapshot: tuple[str, str] | None = None  # (repo, commit) when folder is a hub snapshot


@dataclass(frozen=True)
class WeightCheck:
    """Tensors of the pinned snapshot compared with the model's (a leading slice of each)."""

    compared: int
    differing: tuple[str, ...] = ()
    error: str | None = None  # the files could not be read: a refusal, never a pass


def unwrap_model(model: Any) -> Any:
    """The transformers model under peft (``PeftModel``), DDP/FSDP (``.module``), compile."""
    seen: set[int] = set()
    while model is not None and id(model) not in seen:
        seen.add(id(model))
        if callable(getattr(type(model), "get_base_model", None)):  # peft.PeftModel
            model = model.get_base_model()
        elif getattr(model, "_orig_mod", None) is not None:  # torch.compile
            model = model._orig_mod
        elif getattr(model, "config", None) is None and getattr(model, "module", None) is not None:
            model = model.module  # DistributedDataParallel, FSDP, DataParallel, DeepSpeed
        else:
            break
    return model


def name_and_commit(model: Any) -> tuple[str, str | None]:
    """``config._name_or_path`` (or ``model.name_or_path``) and ``config._commit_hash``."""
    config = getattr(model, "config", None)
    name = getattr(config, "_name_or_path", None) or getattr(model, "name_or_path", None)
    commit = getattr(config, "_commit_hash", None)
    return (
        str(name) if name else "",
        commit if isinstance(commit, str) and commit else None,
    )


def pinned_snapshot(model: ModelSource, manifest_path: Path, *, allow_outside: bool) -> Snapshot:
    """Exactly the snapshot the manifest pins (raises when it is not here or not pinned)."""
    if model.path is not None:
        folder = resolve_inside(manifest_path.parent, model.path, ("model", "path"), allow_outside)
        return local_snapshot(folder)
    assert model.repo is not None
    if not model.revision or not COMMIT_RE.match(model.revision):
        raise InputError(
            "the manifest pins no commit of the model",
            path=str(manifest_path),
            loc=("model", "revision"),
            expected="a 40-hex commit",
            observed=model.revision or "absent",
            hint=f"pin it: ftmanifest lock {manifest_path}",
        )
    return hub_snapshot(model.repo, model.revision)


def read_pinned(model: ModelSource, manifest_path: Path, *, allow_outside: bool) -> Pinned:
    """``pinned_snapshot`` as data; a missing snapshot is already a row of ``verify``."""
    commit = model.revision if model.revision and COMMIT_RE.match(model.revision) else None
    try:
        folder: Path | None = pinned_snapshot(
            model, manifest_path, allow_outside=allow_outside
        ).folder.resolve()
    except FtManifestError:
        folder = None
    return Pinned(str(manifest_path), model.repo if model.path is None else None, commit, folder)


def read_origin(name_or_path: str, commit_hash: str | None, *, cwd: Path | None = None) -> Origin:
    """Look ``name_or_path`` up the way ``from_pretrained`` did: a folder first, else a repo id."""
    if not name_or_path:
        return Origin("", commit_hash)
    path = Path(name_or_path)  # no "~": from_pretrained does not expand it either
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    if path.is_dir():
        folder = path.resolve()
        return Origin(name_or_path, commit_hash, folder, snapshot=hub_snapshot_of(folder))
    if _REPO_ID.match(name_or_path) and ".." not in name_or_path and "--" not in name_or_path:
        return Origin(name_or_path, commit_hash, repo=name_or_path, ref_commit=_main(name_or_path))
    return Origin(name_or_path, commit_hash, path.resolve())


def hub_snapshot_of(folder: Path) -> tuple[str, str] | None:
    """(repo, commit) when ``folder`` is ``.../models--org--name/snapshots/<commit>``."""
    repo_dir = folder.parent.parent.name
    if folder.parent.name == "snapshots" and repo_dir.startswith("models--"):
        if COMMIT_RE.match(folder.name):
            return repo_dir[len("models--") :].replace("--", "/"), folder.name
    return None


def _main(repo: str) -> str | None:
    try:
        return hub_snapshot(repo, "main").commit
    except FtManifestError:
        return None


def judge_origin(origin: Origin, pinned: Pinned) -> list[Finding]:
    """The rows that refuse ``origin`` for ``pinned`` (none when it traces to it)."""
    if not origin.name_or_path:
        return [
            _row(
                pinned,
                "the model has no traceable origin (built from a config in memory?)",
                "no origin: config._name_or_path is empty",
                extra_hint=", or FtManifestCallback(..., trace_model=False) to train it "
                "untraced (the run record says so)",
            )
        ]
    if origin.commit_hash and pinned.commit and origin.commit_hash != pinned.commit:
        return [
            _row(
                pinned,
                "the model was loaded from another commit",
                f"{origin.repo or origin.name_or_path}@{origin.commit_hash} (config._commit_hash)",
                loc=("model", "revision"),
            )
        ]
    if origin.repo is not None:
        return _judge_repo(origin, origin.repo, pinned)
    assert origin.folder is not None
    if pinned.folder is not None and origin.folder == pinned.folder:
        return []
    if origin.snapshot is not None:
        repo, commit = origin.snapshot
        same = repo == pinned.repo and commit == pinned.commit
        what = "a copy of the pinned commit in another cache" if same else "another snapshot"
        return [
            _row(pinned, f"the model was loaded from {what}", f"{repo}@{commit} ({origin.folder})")
        ]
    where = "" if origin.folder.is_dir() else " (not a folder here)"
    return [_row(pinned, "the model was loaded from another folder", f"{origin.folder}{where}")]


def _judge_repo(origin: Origin, repo: str, pinned: Pinned) -> list[Finding]:
    if pinned.repo is None:
        return [
            _row(pinned, "the model was loaded from the hub, not model.path", f"hub repo {repo}")
        ]
    if repo != pinned.repo:
        return [_row(pinned, "the model is another hub repo", repo, loc=("model", "repo"))]
    if origin.commit_hash:
        return []  # equal to the pinned commit (checked above)
    if origin.ref_commit is None or origin.ref_commit != pinned.commit:
        main = origin.ref_commit or "no refs/main snapshot in the hub cache"
        return [
            _row(
                pinned,
                "the model was loaded by repo id, which follows refs/main to another commit",
                f"{repo}@{main} (refs/main; transformers records no revision)",
            )
        ]
    return []


def judge_weights(check: WeightCheck, pinned: Pinned) -> list[Finding]:
    """A row when tensors of the model differ from the pinned snapshot's, or cannot be read."""
    if check.error is not None:
        observed = f"not compared: {check.error}"
    elif check.differing:
        names = ", ".join(check.differing[:3]) + (", ..." if len(check.differing) > 3 else "")
        observed = f"{len(check.differing)} of {check.compared} tensors differ ({names})"
    else:
        return []
    return [
        _row(
            pinned,
            "the model's weights are not the pinned snapshot's",
            observed,
            loc=("model", "files"),
            expected=f"the weights of {pinned.label()}",
            rule=WEIGHTS_RULE,
        )
    ]


def _row(
    pinned: Pinned,
    message: str,
    observed: str,
    *,
    loc: Loc | None = None,
    expected: str | None = None,
    rule: str = ORIGIN_RULE,
    extra_hint: str = "",
) -> Finding:
    return Finding.at(
        loc or pinned.loc,
        kind="drift",
        rule=rule,
        message=message,
        path=pinned.manifest,
        expected=expected or pinned.label(),
        observed=observed,
        hint=f"load it with ftmanifest.integrations.transformers.load_pinned({pinned.manifest!r})"
        + extra_hint,
    )
