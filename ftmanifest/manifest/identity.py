"""What names a recipe and a split, from the manifest alone.

Layer: pure core (manifest).  ``recipe_digest`` is the digest of the sections
that decide what is trained (the preflight record and the ledger's summary
compare it); ``split_entry`` finds a data entry by name, refusing an unknown
one with the names there are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ftmanifest.errors import InputError
from ftmanifest.manifest.canonical import canonical_json, sha256_digest

if TYPE_CHECKING:
    from ftmanifest.manifest import LoadedManifest
    from ftmanifest.manifest.data import DataEntry

# The sections whose canonical form is the recipe (what preflight vouches for).
RECIPE_SECTIONS = ("model", "seeds", "data", "method", "training", "distributed")


def recipe_digest(loaded: LoadedManifest) -> str:
    """sha256 of the canonical recipe sections of ``loaded``."""
    data = loaded.canonical()
    return sha256_digest(canonical_json({k: data.get(k) for k in RECIPE_SECTIONS}))


def split_entry(loaded: LoadedManifest, split: str) -> tuple[int, DataEntry]:
    """The index and entry of data entry ``split``."""
    for n, entry in enumerate(loaded.manifest.data):
        if entry.name == split:
            return n, entry
    names = ", ".join(e.name for e in loaded.manifest.data) or "none"
    raise InputError(
        f"the manifest has no data entry named {split!r}",
        path=str(loaded.path),
        field="data",
        expected=f"one of: {names}",
        observed=split,
        hint="pass --split with the name of a data entry",
    )
