"""Probe: installed distributions, read from their metadata, never imported.

Layer: probe (edge).  Names are normalised as PEP 503 says (lowercase, each
run of '-', '_' and '.' becomes one '-'); versions are kept exactly as found.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata
from typing import TYPE_CHECKING

from ftmanifest.manifest.patterns import normalize_name as normalize_name  # re-exported

if TYPE_CHECKING:
    from ftmanifest.probe._context import ProbeContext


def collect(dists: Iterable[tuple[str | None, str | None]]) -> dict[str, str]:
    """Map (name, version) pairs to {normalised name: version}, first one wins.

    The first wins because importlib.metadata yields distributions in sys.path
    order, and that is the one ``import`` would load.  Broken metadata (no name
    or no version) is skipped.
    """
    out: dict[str, str] = {}
    for name, version in dists:
        if not name or not version:
            continue
        out.setdefault(normalize_name(name), version)
    return dict(sorted(out.items()))


def installed_distributions() -> dict[str, str]:
    """{normalised name: version} of every distribution importlib.metadata sees."""
    return collect((d.metadata["Name"], d.version) for d in metadata.distributions())


def probe(ctx: ProbeContext) -> dict[str, str]:
    return dict(ctx.packages)
