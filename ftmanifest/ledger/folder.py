"""Which ledger folder an experiment's records go to.

Layer: judging rooms (ledger; asks probe.git where the work tree's root is).  In order:

1. ``--ledger DIR``, then
2. ``$FTMANIFEST_LEDGER``, except for ``ledger --manifest M`` (a flag that
   names the manifest only to find its ledger: an explicit flag beats the
   environment), else
3. ``.ftmanifest/ledger`` at the root of the git work tree holding the
   manifest (beside the trust file ``.ftmanifest/allowed_signers``), so every
   manifest of a repository shares one ledger that travels and merges with
   its branches; outside a work tree, ``.ftmanifest/ledger`` in the
   manifest's own folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from ftmanifest.probe.git import repository_root

LEDGER_ENV = "FTMANIFEST_LEDGER"
DEFAULT = Path(".ftmanifest") / "ledger"


def ledger_dir(
    manifest_path: Path | None, option: Path | str | None = None, *, by_flag: bool = False
) -> Path:
    """The ledger folder; ``by_flag``: ``manifest_path`` was given by a flag
    of its own to find the ledger, so it beats ``$FTMANIFEST_LEDGER``."""
    if option is not None and str(option):
        return Path(option)
    env = "" if by_flag and manifest_path else os.environ.get(LEDGER_ENV, "").strip()
    if env:
        return Path(env)
    folder = Path(os.path.abspath(manifest_path)).parent if manifest_path else Path.cwd()

    root = repository_root(folder)
    return (root if root is not None else folder) / DEFAULT


def shown(path: Path, ledger: Path) -> str:
    """A path as records store it: relative to the project holding the ledger
    (the folder above ``.ftmanifest``) when inside it, so no machine's own
    folders are written into a shared ledger."""
    full = Path(os.path.abspath(path))
    try:
        return full.relative_to(Path(os.path.abspath(ledger)).parent.parent).as_posix()
    except ValueError:
        return str(full)
