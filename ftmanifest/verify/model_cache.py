"""What a loader reads instead of the pinned snapshot: one drift row per file.

Layer: judging rooms (verify).  ``snapshot.observe_side`` notes, for the
environment of the process that loads, the hub cache it reads, the
``.no_exist`` markers of the pinned commit and the remote-code copies in
transformers' modules cache; this judges them against the manifest:

* ``drift.model-cache``: the loader reads another hub cache than the one
  verified (transformers 4's ``TRANSFORMERS_CACHE`` and its older names, or,
  for ``run``, a command started with other ``HF_*`` variables);
* ``drift.model-no-exist``: a marker for a file the snapshot has, so a load
  by repo id skips it (a chat template, a generation config, a weight);
* ``drift.model-code-copy``: a copy transformers would import that is not the
  pinned file, a non-empty ``__init__.py`` on the copies' package path, or an
  extension module or package that Python imports before the copy.

Each row names the file, the field, expected, observed and the fix (deleting
the marker or the copy: huggingface_hub and transformers make them again
from the pinned snapshot).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from ftmanifest.findings import Finding
from ftmanifest.hfcache import (
    hub_cache_path,
    imported_cache_dirs,
    legacy_transformers_cache,
    modules_cache_path,
)
from ftmanifest.snapshot import CodeCopy, ModelState, observe_side
from ftmanifest.verify.drift_row import row

if TYPE_CHECKING:
    from ftmanifest.location import Loc
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.verify.observe import Observed

CACHE_RULE = "drift.model-cache"
NO_EXIST_RULE = "drift.model-no-exist"
CODE_COPY_RULE = "drift.model-code-copy"
EMPTY = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def model_cache_rows(m: Manifest, seen: Observed) -> Iterator[Finding]:
    """verify's rows: the side files of ``seen.model`` (this process's environment)."""
    yield from side_rows(m, seen.model, seen.installed.get("transformers"))


def side_rows(m: Manifest, model: ModelState, transformers: str | None) -> Iterator[Finding]:
    """The rows of ``model``'s side fields; ``transformers``: the version that loads."""
    if model.error is not None:
        return
    pinned = {f.path: (i, f.digest) for i, f in enumerate(m.model.files)}
    yield from _legacy(model, transformers)
    yield from _markers(model, pinned)
    for copy in model.code:
        copied = _copy_row(copy, model, pinned)
        if copied is not None:
            yield copied


def command_cache_rows(
    m: Manifest, seen: Observed, environ: Mapping[str, str], transformers: str | None
) -> list[Finding]:
    """``run``'s rows for a command started with ``environ`` (its interpreter's
    ``transformers`` version): none when it reads the caches verify judged;
    else a row when its hub cache is another, and the side rows of its own
    caches (markers and remote-code copies observed again, weights not)."""
    model = seen.model
    if model.error is not None or model.folder is None:
        return []
    same_hub = model.cache_dir is None or _same(hub_cache_path(environ), model.cache_dir)
    same_modules = model.modules_dir is None or _same(
        modules_cache_path(environ), model.modules_dir
    )
    same_legacy = legacy_transformers_cache(environ) == model.legacy_cache
    if (
        same_hub
        and same_modules
        and same_legacy
        and transformers == seen.installed.get("transformers")
    ):
        return []
    rows = []
    if not same_hub:
        theirs = hub_cache_path(environ)
        rows.append(
            row(
                CACHE_RULE,
                ("model", "repo"),
                "the command reads the model from another hub cache than verify hashed",
                model.cache_dir,
                theirs,
                "start the command with the HF_HUB_CACHE / HUGGINGFACE_HUB_CACHE / HF_HOME "
                "that verify used, or verify with the command's",
                path=theirs,
            )
        )
    side = observe_side(model, m, environ)
    return rows + list(side_rows(m, side, transformers))


def imported_cache_rows(model: ModelState) -> list[Finding]:
    """For a guard inside the training process: a row when the huggingface_hub or
    transformers this process has *imported* read other caches than ``model``'s
    (they fix theirs at import; a script that changed ``os.environ`` after the
    import loads from the caches named then)."""
    hub, modules = imported_cache_dirs()
    rows = []
    for name, theirs, ours in (
        ("hub cache (huggingface_hub.constants.HF_HUB_CACHE)", hub, model.cache_dir),
        ("modules cache (transformers' HF_MODULES_CACHE)", modules, model.modules_dir),
    ):
        if theirs is not None and ours is not None and not _same(str(theirs), ours):
            rows.append(
                row(
                    CACHE_RULE,
                    ("model", "repo"),
                    f"this process imported its {name} before the environment changed",
                    ours,
                    str(theirs),
                    "set the HF_* variables before anything imports huggingface_hub or "
                    "transformers (or not at all in the script)",
                    path=str(theirs),
                )
            )
    return rows


def _legacy(model: ModelState, transformers: str | None) -> Iterator[Finding]:
    if model.legacy_cache is None or model.cache_dir is None or not _major_below(transformers, 5):
        return
    name, value = model.legacy_cache
    if _same(value, model.cache_dir):
        return
    yield row(
        CACHE_RULE,
        ("model", "repo"),
        f"{name} names another hub cache: transformers {transformers} loads the model "
        "from it, not from the cache verified",
        model.cache_dir,
        f"{name}={value}",
        f"unset {name} (or set it to {model.cache_dir}): transformers 4 reads it before "
        "huggingface_hub's HF_HUB_CACHE",
        path=value,
    )


def _markers(model: ModelState, pinned: Mapping[str, tuple[int, str | None]]) -> Iterator[Finding]:
    for rel in model.no_exist:
        marker = os.path.join(model.no_exist_dir or "", rel)
        index = pinned.get(rel, (None, None))[0]
        yield row(
            NO_EXIST_RULE,
            ("model", "files", index) if index is not None else ("model", "files"),
            f"a .no_exist marker hides {rel}: loaded by repo id, the model loads without it",
            f"no marker ({rel} {'is pinned' if index is not None else 'is in the snapshot'})",
            f"marker {marker}",
            f"delete {marker} (huggingface_hub notes there that the hub lacked {rel}; the "
            "pinned snapshot has it)",
            path=marker,
        )


def _copy_row(
    copy: CodeCopy, model: ModelState, pinned: Mapping[str, tuple[int, str | None]]
) -> Finding | None:
    rel = copy.stands_for
    index = pinned.get(rel or "", (None, None))[0]
    loc: Loc = ("model", "files", index) if index is not None else ("model", "files")
    if copy.role == "shadow":
        return row(
            CODE_COPY_RULE,
            loc,
            f"{copy.path} is imported instead of the copy of {rel} in the modules cache",
            f"only the copy of {rel}",
            copy.path,
            f"delete {copy.path}",
            path=copy.path,
        )
    if copy.role == "init":
        if copy.error is None and copy.digest == EMPTY:
            return None
        return row(
            CODE_COPY_RULE,
            loc,
            f"{copy.path} is not empty: importing the model's remote code runs it",
            "an empty file (transformers creates it so)",
            copy.error or f"{copy.digest} ({copy.size} bytes)",
            f"delete {copy.path} (transformers creates it again, empty)",
            path=copy.path,
        )
    if not copy.kept:
        return None  # transformers replaces it with the snapshot's file first
    want = pinned.get(rel or "", (None, None))[1]
    if want is None and rel in model.files:
        want = model.files[rel].digest
    if copy.error is None and copy.digest == want:
        return None
    folder = os.path.dirname(copy.path)
    return row(
        CODE_COPY_RULE,
        loc,
        f"the copy of {rel} that transformers imports (trust_remote_code) is not the pinned file",
        want,
        copy.error or copy.digest,
        f"delete {folder} (transformers copies the pinned files there again)",
        path=copy.path,
    )


def _same(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def _major_below(version: str | None, major: int) -> bool:
    head = (version or "").split(".")[0]
    return head.isdigit() and int(head) < major
