"""Drift of the pinned files: the model, the data entries and every other pinned file.

Layer: judging rooms - pure core.  What flows through here is ``Observed``'s
``model``, ``data`` and ``pinned`` file states against the digests, sizes and record
counts the manifest pins: a row per file that differs, is missing or was never pinned,
and for a folder of shards the shard that differs.  The hashing happened in
``observe``; this module never reads the disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ftmanifest.findings import Finding
from ftmanifest.hfcache import is_weight_file
from ftmanifest.manifest.patterns import COMMIT_RE
from ftmanifest.manifest.pinned import pinned_files
from ftmanifest.verify.drift_row import row

if TYPE_CHECKING:
    from ftmanifest.location import Loc
    from ftmanifest.manifest.model import Manifest
    from ftmanifest.snapshot import FileState
    from ftmanifest.verify.observe import Observed


def _model(m: Manifest, seen: Observed) -> Iterator[Finding]:
    model = seen.model
    if model.error is not None:
        err = model.error
        yield row(
            "drift.model-revision",
            err.loc or ("model",),
            err.message,
            err.expected,
            err.observed,
            err.hint or "make the model available",
        )
        # Accepting the revision row must not leave the weights unchecked: every
        # pinned file gets a row of its own, which no --accept covers.
        for i, f in enumerate(m.model.files):
            yield row(
                "drift.model-unchecked",
                ("model", "files", i),
                f"model file {f.path} was not checked: the pinned snapshot is not here",
                f.digest,
                "not checked",
                "make the pinned snapshot available (see the model row above)",
                path=f.path,
            )
        return
    if m.model.repo is not None and not COMMIT_RE.match(m.model.revision or ""):
        yield _unpinned(("model", "revision"), f"hub model {m.model.repo}", model.commit)
    elif model.commit and m.model.revision and model.commit != m.model.revision:
        yield row(
            "drift.model-revision",
            ("model", "revision"),
            "model snapshot is another commit",
            m.model.revision,
            model.commit,
            "run `ftmanifest lock` or fetch the revision",
        )
    rows = list(_model_files(m, seen))
    yield from rows
    if rows:
        return  # the file rows explain any tree difference
    tree_want, tree_have = m.model.tree_digest, model.tree_digest
    if tree_want and tree_have != tree_want:
        others = sorted(p for p in model.files if p not in {f.path for f in m.model.files})
        yield row(
            "drift.model-tree",
            ("model", "tree_digest"),
            "model folder differs from the pin",
            tree_want,
            tree_have or "not computed: a file could not be hashed",
            "extra files: " + ", ".join(others[:5])
            if others
            else "re-lock only if the change is intended",
        )


def _model_files(m: Manifest, seen: Observed) -> Iterator[Finding]:
    model = seen.model
    listed = set()
    for i, f in enumerate(m.model.files):
        listed.add(f.path)
        have = model.files.get(f.path)
        field = ("model", "files", i)
        if have is None:
            yield row(
                "drift.model-file",
                field,
                f"model file {f.path} is missing",
                f.digest,
                "absent",
                "restore the file, or re-download the pinned revision",
                path=f.path,
            )
        elif have.error:
            yield row(
                "drift.model-file",
                field,
                f"model file {f.path} is unreadable",
                f.digest,
                have.error,
                "fix the file's permissions or restore it",
                path=f.path,
            )
        elif f.digest is None:
            yield _unpinned(field, f"model file {f.path}", have.digest)
        elif have.digest != f.digest:
            yield row(
                "drift.model-file",
                field,
                f"model file {f.path} changed",
                f.digest,
                have.digest,
                "re-download the pinned revision; never edit weights in place",
                path=f.path,
            )
    # Every unlisted file is a row of its own (a weight of another revision, a
    # FIFO, remote code that trust_remote_code would run): none is accepted by
    # accepting a listed file's row, and "model.files" names no single row.
    for p in sorted(p for p in model.files if p not in listed):
        error = model.files[p].error
        what = (
            f"unreadable or special file {p}"
            if error
            else f"extra weight file {p}"
            if is_weight_file(p)
            else f"extra file {p}"
        )
        yield row(
            "drift.model-extra",
            ("model", "files"),
            f"{what} in the model folder, not in the manifest",
            "only the pinned files",
            error or p,
            "remove it (anything in the model folder may be loaded), or re-lock after review",
            path=p,
        )


def _unpinned(field: Loc, what: str, observed: str | None) -> Finding:
    """A pin left empty: verify has nothing to compare with, so it refuses (lint warns too)."""
    return row(
        "drift.unpinned",
        field,
        f"{what} is not pinned",
        "a pinned value",
        f"not pinned (here: {observed or 'absent'})",
        "run `ftmanifest lock` to pin what is here, review the diff, then sign",
    )


def _file_rows(
    rule: str, field: Loc, what: str, want_digest: str | None, have: FileState, fix: str
) -> Iterator[Finding]:
    if have.error:
        yield row(
            rule,
            field,
            f"{what} {have.path}: {have.error}",
            want_digest or "present",
            have.error,
            fix,
            path=have.path,
        )
    elif want_digest is None:
        yield _unpinned(field, f"{what} {have.path}", have.digest)
    elif have.digest != want_digest:
        yield row(
            rule,
            field,
            f"{what} {have.path} changed",
            want_digest,
            have.digest,
            fix,
            path=have.path,
        )


def _data(m: Manifest, seen: Observed) -> Iterator[Finding]:
    for i, (entry, have) in enumerate(zip(m.data, seen.data, strict=True)):
        folder = have.tree is not None
        named = folder and have.differs is not None
        yield from _file_rows(
            "drift.data",
            ("data", i, "digest"),
            f"data {entry.name!r}",
            entry.digest,
            have,
            "restore the pinned data, or re-lock after review"
            if named or not folder
            else "restore the pinned data, or re-lock after review (the pinned list of "
            f"{entry.path!r}'s files is not in this machine's cache, so the files that "
            "differ cannot be named: compare the folder with the machine that locked it)",
        )
        yield from _shard_rows(i, entry.name, entry.path, have)
        if (
            have.error is None
            and entry.records is not None
            and have.records is not None
            and have.records != entry.records
        ):
            yield row(
                "drift.records",
                ("data", i, "records"),
                f"data {entry.name!r} record count differs",
                entry.records,
                have.records,
                "restore the pinned data, or re-lock after review",
                path=have.path,
            )


def _shard_rows(i: int, name: str, top: str, have: FileState) -> Iterator[Finding]:
    """One row per file of a data folder that differs from the folder's pinned list."""
    diff = have.differs
    if diff is None:
        return
    field: Loc = ("data", i, "digest")
    fix = "restore the pinned data, or re-lock after review"
    top = top.rstrip("/")
    rows: list[tuple[str, str, object, object]] = [
        *((rel, "changed", want, dig) for rel, want, dig in diff.changed),
        *((rel, "is missing", want, "absent") for rel, want in diff.missing),
        *((rel, "is not in the pin", "absent", dig) for rel, dig in diff.added),
    ]
    for rel, what, want, dig in sorted(rows, key=lambda r: r[0].encode("utf-8")):
        shown = f"{top}/{rel}"
        yield row(
            "drift.data-shard",
            field,
            f"data {name!r}: {shown} {what}",
            want,
            dig,
            fix,
            path=shown,
        )
    if diff.total > diff.named:
        yield row(
            "drift.data-shard",
            field,
            f"data {name!r}: {diff.total - diff.named} more files of {top} differ",
            "the pinned files",
            f"{diff.total} files differ, {diff.named} named above",
            fix,
            path=top,
        )


def _pinned(m: Manifest, seen: Observed) -> Iterator[Finding]:
    for loc, _path, digest in pinned_files(m):
        have = seen.pinned.get(loc)
        if have is not None:
            yield from _file_rows(
                "drift.file",
                (*loc, "digest"),
                "pinned file",
                digest,
                have,
                "restore the pinned file, or re-lock after review",
            )
