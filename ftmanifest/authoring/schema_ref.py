"""Where a manifest ``init`` writes points its ``$schema``: never at this machine.

Layer: edges - authoring (looks at the folders above the manifest).  A manifest is
committed and read on other machines, so the editor hint names the schema as
every clone can: a copy committed in the same repository
(``schema/ftmanifest.schema.json``, as ftmanifest's own repository holds it and
``ftmanifest schema > schema/ftmanifest.schema.json`` writes it), by its path
relative to the manifest; else the schema's published id.  The copy inside the
installed package is never named: its path is this machine's, this virtual
environment's and this Python version's.
"""

from __future__ import annotations

import os
from pathlib import Path

from ftmanifest.manifest.schema import SCHEMA_ID
from ftmanifest.probe.git import repository_root

COPY = Path("schema") / "ftmanifest.schema.json"


def schema_ref(manifest: Path) -> str:
    """A committed copy of the schema, relative to ``manifest``, or the published id."""
    folder = manifest.parent.resolve()
    top = repository_root(folder) or folder
    for parent in (folder, *folder.parents):
        if (parent / COPY).is_file():
            return Path(os.path.relpath(parent / COPY, folder)).as_posix()
        if parent == top.resolve():
            break
    return SCHEMA_ID
