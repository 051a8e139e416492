"""Is the script ``run`` starts part of the pinned training code?

Layer: judging rooms - verify (edge: asks git for the repository root, resolves paths).
``environment.code.commit`` pins the repository holding the manifest (or
``--code DIR``); a script outside it is code no commit covers, so ``run``
refuses it.  The script is the first word of the command that names a file
ending in ``.py`` or ``.sh`` (``./train.sh``, ``python train.py``,
``torchrun --nproc-per-node 8 train.py``, ``accelerate launch train.py``);
interpreters and launchers are not judged, and ``python -m module`` names
no file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ftmanifest.errors import RefusedError
from ftmanifest.probe.git import repository_root

SCRIPT_SUFFIXES = (".py", ".sh")


class ScriptNotPinnedError(RefusedError):
    """``run`` would start a script outside the repository whose commit the manifest pins."""

    reason = "script-not-pinned"


def script_of(command: Sequence[str], cwd: Path) -> Path | None:
    """The script file ``command`` runs, or None when it names none."""
    if not command:
        return None
    for arg in command:
        if arg.startswith("-") or not arg.endswith(SCRIPT_SUFFIXES):
            continue
        candidate = cwd / arg
        if candidate.is_file():
            return Path(os.path.abspath(candidate))
    return None


def check_script_pinned(
    command: Sequence[str], manifest_path: Path, pinned: str | None, code_dir: Path | None
) -> None:
    """Refuse when the manifest pins a commit and ``command``'s script lies outside its
    repository (symlinks resolved: a link in the repository to a file outside is outside)."""
    script = script_of(command, Path.cwd())
    if pinned is None or script is None:
        return
    folder = Path(os.path.abspath(code_dir or manifest_path.parent))
    root = repository_root(folder)
    if root is None:
        return  # verify has already refused the missing repository
    real_root, real = Path(os.path.realpath(root)), Path(os.path.realpath(script))
    if real == real_root or real_root in real.parents:
        return
    raise ScriptNotPinnedError(
        "the script to run is not in the repository the manifest pins",
        path=str(script),
        field="environment.code.commit",
        expected=f"a script inside {root} (commit {pinned[:12]})",
        observed=f"{script}" + (f" (links to {real})" if real != script else ""),
        hint=f"move the script into {root} and commit it, then `ftmanifest lock` again; "
        "or, when the training code lives in another repository, lock with --code DIR",
    )
