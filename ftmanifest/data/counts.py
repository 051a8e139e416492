"""Each data entry's record count and digest against the manifest, as ``verify`` checks them.

Layer: judging rooms - data (edge: hashes through ``observe.observe_data``, the same
read and stat cache as ``verify``; the rows are ``drift.DRIFT_CHECKS``' ``data`` check,
so both commands always agree).

A digest or record count that differs is an **error** naming the entry, the
field, the expected and the observed value; a data entry with no digest
pinned yet is a **warning** here (``verify`` refuses it; ``data check`` is
often run before the first ``lock``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ftmanifest.checks import run_checks
from ftmanifest.findings import Finding
from ftmanifest.manifest import LoadedManifest
from ftmanifest.verify.drift import DRIFT_CHECKS
from ftmanifest.verify.observe import observe_data

FIX = "restore the pinned data, or run `ftmanifest lock` to pin what is here after review"


def count_findings(loaded: LoadedManifest, *, allow_outside: bool = False) -> list[Finding]:
    """verify's data rows for ``loaded`` (a ``manifest.Loaded``), kind ``data``."""
    manifest = loaded.manifest
    seen = SimpleNamespace(
        data=observe_data(
            manifest,
            Path(loaded.path).parent,
            use_cache=manifest.security.rehash != "always",
            allow_outside=allow_outside,
        )
    )
    out = []
    for row in run_checks(DRIFT_CHECKS, manifest, seen, only=["data"]):
        unpinned = row.rule == "drift.unpinned"
        out.append(
            row._replace(
                kind="data",
                severity="warning" if unpinned else row.severity,
                hint="run `ftmanifest lock` to pin it, review the diff, then sign"
                if unpinned
                else FIX,
            )
        )
    return out
