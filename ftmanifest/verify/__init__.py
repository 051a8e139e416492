"""Verify: is this machine, with these files, the run the manifest describes?

Layer: judging rooms (after scan, the ledger and adapter; before preflight,
data, results and backup).  The heart of the tool, one room:

* ``observe`` - what is here: the model's and data's files hashed (through
  the stat cache), the pinned files, packages, backend, env vars, code;
* ``environment`` - the observed environment as the manifest's own model,
  comparable with a colleague's recorded one;
* ``drift`` - the manifest against the observation, one row per difference;
* ``acceptances`` - rows accepted on purpose, each with its reason;
* ``pipeline`` - ``verify_manifest``: load, observe, compare, check the
  signature, accept, and the ledger's summary;
* ``lock`` - pin what is observed into the manifest;
* ``reproduce`` - a colleague's run, set up from its manifest.
"""

from __future__ import annotations

from ftmanifest.verify.acceptances import Acceptance, apply_acceptances
from ftmanifest.verify.pipeline import (
    DriftError,
    VerifyReport,
    scan_for_verify,
    variant_check,
    verify_manifest,
)

__all__ = [
    "Acceptance",
    "DriftError",
    "VerifyReport",
    "apply_acceptances",
    "scan_for_verify",
    "variant_check",
    "verify_manifest",
]
