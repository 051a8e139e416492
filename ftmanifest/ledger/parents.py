"""Where a variant's parent is: beside it, else in the ledger.

Layer: judging rooms - edge (reads the variant's folder and the ledger folder), shared
by ``verify`` and ``lint`` so both judge a variant against the same parent.

1. The manifests in the variant's own folder (``.yaml``, ``.yml``, ``.json``,
   ``.toml``; not ``*.sig.json``, not the variant itself, at most
   ``CANDIDATES_MAX`` of them) whose ``experiment.id`` is the parent id.  One
   such file is the parent, whatever the ledger holds: the file is what the
   author sees and edits.  Two or more are ambiguous and nothing is judged.
2. Else the ledger's newest record for the parent id that carries the
   manifest's body (``ledger plan`` and ``run`` write it).  The body is used
   only when it still hashes to the record's ``manifest.digest`` and builds
   the ``Manifest`` model; otherwise the parent is not found and the finding
   says why.  An older body is never used in its place: the newest is what the
   parent was last run or planned as.

The folder is scanned by parsing each file and reading its id; only a match
is validated and built, so a folder of many manifests costs one parse each.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ftmanifest.errors import FtManifestError
from ftmanifest.findings import Finding
from ftmanifest.ledger import open_ledger
from ftmanifest.lint import field_loc, is_variant
from ftmanifest.manifest import LoadedManifest, build_model, load_manifest
from ftmanifest.manifest.canonical import canonical_json, sha256_digest
from ftmanifest.manifest.load import Document, read_document
from ftmanifest.manifest.variant import variant_findings

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest
    from ftmanifest.manifest.load import Document

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json", ".toml")
CANDIDATES_MAX = 500
NOT_FOUND = "variant.parent-not-found"
Severity = Literal["error", "warning", "info"]


class ParentSearch:
    """The outcome of one lookup: the parent (or None) and what was seen on the way."""

    __slots__ = ("parent_id", "found", "source", "folder", "beside", "ledger", "notes")

    def __init__(self, parent_id: str, folder: Path) -> None:
        self.parent_id = parent_id
        self.folder = folder
        self.found: Any = None  # a LoadedManifest
        self.source: str | None = None  # "beside" or "ledger"
        self.beside: list[Path] = []  # files beside the variant with the parent's id
        self.ledger: Path | None = None  # the ledger folder consulted, if any
        self.notes: list[str] = []  # why a candidate was not used


def find_parent(
    manifest_path: Path, parent_id: str, *, ledger: Path | str | None = None
) -> ParentSearch:
    """Look for ``parent_id`` beside ``manifest_path``, then in the ledger."""
    search = ParentSearch(parent_id, Path(os.path.abspath(manifest_path)).parent)
    _beside(search, Path(manifest_path))
    if search.found is not None:
        search.source = "beside"
    elif not search.beside:
        _from_ledger(search, manifest_path, ledger)
    return search


def _beside(search: ParentSearch, manifest_path: Path) -> None:
    here = manifest_path.resolve()
    try:
        names = sorted(os.listdir(search.folder))
    except OSError as exc:
        search.notes.append(f"its folder cannot be listed ({exc.strerror or exc})")
        return
    candidates = [
        n
        for n in names
        if os.path.splitext(n)[1] in MANIFEST_SUFFIXES and not n.endswith(".sig.json")
    ]
    if len(candidates) > CANDIDATES_MAX:
        search.notes.append(f"only the first {CANDIDATES_MAX} files of its folder were read")
    for name in candidates[:CANDIDATES_MAX]:
        p = search.folder / name
        if not p.is_file() or p.resolve() == here:
            continue
        try:
            data = read_document(p).data
        except (FtManifestError, OSError):
            continue  # not a manifest (a lock file, an envelope) or unreadable
        exp = data.get("experiment") if isinstance(data, dict) else None
        if not isinstance(exp, dict) or exp.get("id") != search.parent_id:
            continue
        search.beside.append(p)
        try:
            search.found = load_manifest(p)
        except (FtManifestError, OSError) as exc:
            search.notes.append(f"{name} has the id but is not a valid manifest ({exc})")
            search.found = None
            return  # the parent's file is beside it, broken: the ledger is not asked
    if len(search.beside) != 1:
        search.found = None


def _from_ledger(search: ParentSearch, manifest_path: Path, option: Path | str | None) -> None:
    try:
        store = open_ledger(manifest_path, option)
    except OSError as exc:
        search.notes.append(f"the ledger cannot be located ({exc})")
        return
    search.ledger = store.root
    if not store.exists():
        search.notes.append(f"no ledger at {store.root}")
        return
    entries = store.read().entries
    newest = next((e for e in reversed(entries) if _carries(e.record, search.parent_id)), None)
    if newest is None:
        search.notes.append(f"no record in the ledger {store.root} carries its manifest")
        return
    loaded, why = body_manifest(newest.record["manifest"], str(newest.file))
    if loaded is None:
        search.notes.append(f"the ledger's newest record of it ({newest.short}) is not used: {why}")
        return
    search.found, search.source = loaded, "ledger"


def _carries(record: dict[str, Any], parent_id: str) -> bool:
    exp, ref = record.get("experiment"), record.get("manifest")
    return (
        isinstance(exp, dict)
        and exp.get("id") == parent_id
        and isinstance(ref, dict)
        and isinstance(ref.get("body"), dict)
    )


def body_manifest(ref: dict[str, Any], where: str) -> tuple[Any, str]:
    """A record's ``manifest`` reference as a ``LoadedManifest``, or (None, why not)."""
    body = ref["body"]
    try:
        digest = sha256_digest(canonical_json(body))
    except (ValueError, RecursionError):
        return None, "its body has no canonical form"
    if digest != ref.get("digest"):
        return None, f"its body does not hash to its digest (edited): {digest[:19]}..."
    text = json.dumps(body)
    try:
        model = build_model(Document(where, "json", text, body))
    except FtManifestError as exc:
        return None, f"its body is not a valid manifest ({exc})"
    return LoadedManifest(Path(where), Document(where, "json", text, body), model), ""


def not_found(
    search: ParentSearch, manifest_path: Path, *, severity: Severity = "error"
) -> Finding:
    """The finding for a parent that cannot be used: where it was looked for, and why."""
    pid = search.parent_id
    if len(search.beside) > 1:
        seen = f"{len(search.beside)} manifests"
        where = "beside it"
    elif search.beside:
        seen = "an invalid manifest"
        where = "beside it"
    else:
        seen = "no manifest"
        where = "beside it or in the ledger"
    ledger = f" or a record of it in the ledger {search.ledger}" if search.ledger else ""
    return Finding.at(
        ("experiment", "parent"), kind="variant", rule=NOT_FOUND, severity=severity,
        message=f"{seen} with experiment.id {pid!r} {where}: the variant's changes "
        "cannot be judged",
        path=str(manifest_path),
        expected=f"exactly one manifest with id {pid!r} in {search.folder}{ledger}",
        observed="; ".join([seen, *search.notes]),
        hint="keep the parent's manifest beside the variant or record it in the ledger "
        "(`ftmanifest ledger plan PARENT`), or remove experiment.parent",
    )  # fmt: skip


def judge_variant(
    loaded: LoadedManifest,
    manifest_path: Path,
    *,
    ledger: Path | str | None = None,
    missing: Severity = "error",
) -> list[Finding]:
    """``loaded`` (a variant's ``LoadedManifest``) against its parent wherever it is;
    a parent that cannot be found is one finding of severity ``missing``."""
    parent = loaded.manifest.experiment.parent
    if parent is None:
        return []  # not a variant: no parent to judge it against
    search = find_parent(manifest_path, parent, ledger=ledger)
    if search.found is None:
        return [not_found(search, manifest_path, severity=missing)]
    return variant_findings(search.found, loaded)


def variant_lint(doc: Document) -> list[Finding]:
    """A variant's fairness against its parent, as lint findings (FTM080, FTM081);
    [] for a non-variant.  ``lint`` runs it through ``ftmanifest.lint_paths``."""
    if not is_variant(doc):
        return []

    path = Path(doc.path)
    found = []
    for f in judge_variant(LoadedManifest(path, doc, build_model(doc)), path, missing="warning"):
        loc = f.loc or field_loc(doc.data, f.field or "")
        line, col = doc.position(loc)
        found.append(
            f._replace(
                kind="lint",
                message=f.message if f.severity == "error" else f"{f.severity}: {f.message}",
                rule="FTM081" if f.rule == NOT_FOUND else "FTM080",
                line=line,
                column=col,
                loc=loc,
                extra={"check": f.rule},
            )
        )
    return found
