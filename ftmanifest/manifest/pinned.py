"""The files a manifest pins besides its model and data: one walk for all readers.

Layer: pure core - manifest (pure; reads the model, never the disk).  The lock file,
each data entry's cleaning and transform scripts, and the baseline's results and config,
in that order.  ``observe`` hashes them, ``drift`` compares the hashes with the pinned
digests, and a run keeps them out of its own outputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ftmanifest.location import Loc, format_loc

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest


class PinnedFile(NamedTuple):
    loc: Loc  # where the manifest pins it, e.g. ("data", 0, "cleaning", 1)
    path: str  # as written, relative to the manifest's folder
    digest: str | None  # the pinned ``sha256:...``; None when not locked yet

    @property
    def field(self) -> str:
        """The location as text: ``data[0].cleaning[1]``."""
        return format_loc(self.loc)


def pinned_files(manifest: Manifest) -> list[PinnedFile]:
    """Every other file ``manifest`` pins, with its field, path and digest."""
    out: list[PinnedFile] = []
    lock = manifest.environment.lock
    if lock is not None:
        out.append(PinnedFile(("environment", "lock"), lock.path, lock.digest))
    for i, entry in enumerate(manifest.data):
        for kind in ("cleaning", "transforms"):
            for j, script in enumerate(getattr(entry, kind)):
                out.append(PinnedFile(("data", i, kind, j), script.path, script.digest))
    baseline = manifest.evaluation.baseline
    for name in ("results", "config"):
        ref = getattr(baseline, name)
        if ref is not None:
            out.append(PinnedFile(("evaluation", "baseline", name), ref.path, ref.digest))
    return out
