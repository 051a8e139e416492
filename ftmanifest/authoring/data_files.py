"""Source: data files or folders, and the ``data`` entries made of every one named.

Layer: edges - authoring (reads the first bytes of each file).  A file's role comes
from the config that names it (axolotl's ``datasets`` train, ``test_datasets``
evaluate) or else from its name (``train``, ``eval``/``val``/``dev``,
``test``, ``baseline``); its format from its content (``formats.data_format``).
Digests and record counts are ``lock``'s.  What only a person can say stays a
FILL: the licence, whether it holds personal data, a role the name does not
tell, and whether a test split is the sealed one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ftmanifest.authoring.draft import DataFile, Draft
from ftmanifest.authoring.formats import data_format
from ftmanifest.authoring.model_source import relative
from ftmanifest.fsutil import PathOutsideError, enclosing_repository, resolve_inside

_ROLE_WORDS = {
    "train": "train",
    "training": "train",
    "eval": "eval",
    "evaluation": "eval",
    "val": "eval",
    "valid": "eval",
    "validation": "eval",
    "dev": "eval",
    "test": "test",
    "baseline": "baseline-eval",
}


def role_from_name(path: Path) -> str | None:
    """The role the file name states, when exactly one role word is in it."""
    words = re.split(r"[^a-z]+", path.name.lower().split(".")[0])
    roles = {_ROLE_WORDS[w] for w in words if w in _ROLE_WORDS}
    if roles == {"baseline-eval", "eval"}:
        return "baseline-eval"
    return roles.pop() if len(roles) == 1 else None


def read(path: Path, base: Path, draft: Draft) -> None:
    """A data file or folder named on the command line."""
    role = role_from_name(path)
    draft.add_data(path, role, "the file name" if role else None, str(path), "--from")


def entries(draft: Draft, base: Path) -> list[dict[str, Any]]:
    """The ``data`` section: one entry per file, with comments and FILLs in the draft."""
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    for i, item in enumerate(draft.data):
        entry = _entry(item, base, names)
        out.append(entry)
        loc = ("data", i)
        rel = entry["path"] or item.hub or entry["name"]
        if entry["path"] and _leaves(base, rel):
            draft.notes.append(
                f"{rel} lies outside the manifest's repository: lock and verify refuse it "
                "unless given --allow-outside; move it into the repository"
                if enclosing_repository(base)
                else f"{rel} lies outside the manifest's folder: lock and verify refuse it "
                "unless given --allow-outside; write the manifest in a folder above it, or "
                "make a git repository that holds both"
            )
        if item.path is None:
            draft.fill(
                (*loc, "path"),
                f"a local copy of the hub dataset {item.hub} (e.g. hf download {item.hub} "
                "--repo-type dataset --local-dir DIR), as its file or folder relative to the "
                "manifest; `ftmanifest lock` pins its digest",
            )
        else:
            draft.put((*loc, "path"), rel, item.source, item.key)
        if item.role_from == "the file name":
            draft.put((*loc, "role"), item.role, rel, "the file name")
        elif item.role is not None:
            draft.put((*loc, "role"), item.role, item.source, item.key.split("[")[0])
        else:
            draft.fill(
                (*loc, "role"),
                "train | eval | test | baseline-eval | other: what this file is used for",
            )
        if entry["format"] is not None:
            draft.put((*loc, "format"), entry["format"], rel, "its content")
        draft.fill((*loc, "license"), f"the licence or rights under which {rel} is used")
        draft.fill(
            (*loc, "contains_personal_data"),
            "true or false: does it hold personal data (names, e-mails, health...)",
        )
        if item.role == "test":
            draft.fill(
                (*loc, "sealed"),
                "true if this is the final test split (every use is counted, never tuned on)",
            )
    return out


def _leaves(base: Path, rel: str) -> bool:
    """Whether ``lock`` would refuse ``rel`` as leaving the manifest's repository."""
    try:
        resolve_inside(base, rel, (), allow_outside=False)
    except PathOutsideError:
        return True
    return False


def _entry(item: DataFile, base: Path, names: set[str]) -> dict[str, Any]:
    rel = relative(item.path, base) if item.path is not None else None
    file_name = item.path.name if item.path is not None else str(item.hub).rsplit("/", 1)[-1]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", file_name.split(".")[0]).strip("-") or "data"
    name = item.role if item.role and item.role not in names else stem
    n = 2
    while name in names:
        name, n = f"{stem}-{n}", n + 1
    names.add(name)
    entry: dict[str, Any] = {"name": name, "role": item.role, "path": rel}
    try:
        entry["format"] = data_format(item.path) if item.path is not None else None
    except OSError:
        entry["format"] = None
    entry.update({"digest": None, "records": None, "license": None})
    entry["contains_personal_data"] = None
    if item.role == "test":
        entry["sealed"] = False
    return entry
