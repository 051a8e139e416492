"""Probe: installed distributions, read from their metadata, never imported.

Layer: probes and runtime - probe (edge).  Names are normalised as PEP 503 says
(lowercase, each run of '-', '_' and '.' becomes one '-'); versions are kept exactly as
found.

Tests only: with ``FTMANIFEST_TESTING=1``, ``FTMANIFEST_TEST_PACKAGE_VERSIONS=
name=version,...`` makes one process look as if it had other versions (a
drifted rank of a torchrun job, without a second venv).  It can only make a
process look *different*, never clean: the reported version is the requested
one plus a random marker drawn per process (``2.0 (test override 3f9a0c1d)``),
not a PEP 440 version, so it equals no pin a manifest could hold and no other
process's value; an overridden package is always a drift row.  ``verify`` and
the Trainer guard print a warning while it is active.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
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


TEST_VERSIONS = "FTMANIFEST_TEST_PACKAGE_VERSIONS"


def name_version(dist: metadata.Distribution) -> tuple[str | None, str | None]:
    """A distribution's ``Name`` and ``Version`` as ``dist.metadata`` gives them,
    read from the metadata's header block only: ``dist.metadata`` parses the
    whole file, long description included, as e-mail (a quarter of a second for
    the 140 distributions of a torch + transformers venv, on every guarded start).
    A header block this reader cannot read alone goes to ``dist.metadata``."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if text is None:
        return None, None
    found: dict[str, str] = {}
    last = ""
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if not line:
            break  # the end of the header block
        if line[0] in " \t":  # a folded header
            if last in ("name", "version"):
                return dist.metadata["Name"], dist.version
            continue
        key, colon, value = line.partition(":")
        last = key.strip().lower() if colon else ""
        if last in ("name", "version") and last not in found:
            found[last] = value.lstrip(" \t")  # as the e-mail parser keeps it
    if len(found) < 2:
        return dist.metadata["Name"], dist.version
    return found["name"], found["version"]


def installed_distributions() -> dict[str, str]:
    """{normalised name: version} of every distribution importlib.metadata sees."""
    found = collect(name_version(d) for d in metadata.distributions())
    forced = forced_versions()
    return dict(sorted({**found, **forced}.items())) if forced else found


def forced_versions(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test override (module doc), marked so that it never matches; {} unless testing."""
    import secrets

    env = os.environ if environ is None else environ
    if env.get("FTMANIFEST_TESTING") != "1" or not env.get(TEST_VERSIONS):
        return {}
    marker = secrets.token_hex(4)
    pairs = (item.partition("=") for item in env[TEST_VERSIONS].split(",") if item.strip())
    return {
        normalize_name(name.strip()): f"{version.strip()} (test override {marker})"
        for name, _, version in pairs
    }


def probe(ctx: ProbeContext) -> dict[str, str]:
    return dict(ctx.packages)
