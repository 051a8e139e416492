"""Where a new manifest's lock file goes, and the command that makes it.

Layer: edges (authoring; asks the file system for the enclosing repository).
``environment.lock.path`` is relative to the manifest's folder.  A manifest in
a folder of a repository (``manifests/exp.yaml``) names the lock file at the
repository's top (``../requirements.lock``), where ``pip freeze`` run from the
top writes it; the note says the command from where the user stands, so that
``lock`` finds the file the note made.
"""

from __future__ import annotations

import os
from pathlib import Path

from ftmanifest.fsutil import enclosing_repository

NAME = "requirements.lock"


def lock_file(manifest: Path) -> tuple[str, str]:
    """(``environment.lock.path`` for ``manifest``, that file as a path from here, or
    from the manifest's folder when it is not below here)."""
    folder = Path(os.path.abspath(manifest.parent)).resolve()
    top = enclosing_repository(folder) or folder
    target = top / NAME
    named = os.path.relpath(target, folder)
    here = os.path.relpath(target, Path.cwd().resolve())
    if here.startswith(os.pardir):  # never a path of this machine in a committed file
        return named, f"{named} (run in the manifest's folder)"
    return named, here


def make_note(shown: str) -> str:
    """The comment beside ``environment.lock.path``: how to make the file named."""
    return (
        f"make it: pip freeze > {shown} (or uv pip compile / pip-compile --generate-hashes); "
        "`ftmanifest lock` pins its digest"
    )
