"""The files a manifest pins besides its model and data: one walk for all readers.

Layer: manifest (pure; reads the model, never the disk).  The lock file, each
data entry's cleaning and transform scripts, and the baseline's results and
config, in that order.  ``observe`` hashes them, ``drift`` compares the hashes
with the pinned digests, and a run keeps them out of its own outputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest


class PinnedFile(NamedTuple):
    field: str  # where the manifest pins it, e.g. ``data[0].cleaning[1]``
    path: str  # as written, relative to the manifest's folder
    digest: str | None  # the pinned ``sha256:...``; None when not locked yet


def pinned_files(manifest: Manifest) -> list[PinnedFile]:
    """Every other file ``manifest`` pins, with its field, path and digest."""
    out: list[PinnedFile] = []
    lock = manifest.environment.lock
    if lock is not None:
        out.append(PinnedFile("environment.lock", lock.path, lock.digest))
    for i, entry in enumerate(manifest.data):
        for kind in ("cleaning", "transforms"):
            for j, script in enumerate(getattr(entry, kind)):
                out.append(PinnedFile(f"data[{i}].{kind}[{j}]", script.path, script.digest))
    baseline = manifest.evaluation.baseline
    for name in ("results", "config"):
        ref = getattr(baseline, name)
        if ref is not None:
            out.append(PinnedFile(f"evaluation.baseline.{name}", ref.path, ref.digest))
    return out
