"""Which trust file (allowed signers) judges a manifest, and why; and the
key ``keygen`` writes and ``sign`` uses when none is named (``DEFAULT_KEY``).

Layer: signing (edge: asks git, stats folders).  In order:

1. ``--trust PATH`` (``trust_path``), then
2. the environment variable ``FTMANIFEST_TRUST_FILE`` (CI pins trust with it
   to a file outside the checkout, which a pull request cannot change), else
3. ``.ftmanifest/allowed_signers`` at the root of the git work tree holding
   the folder where the manifest was *named* (a symlinked manifest takes its
   trust from the link's repository, not its target's); outside a work tree,
   only the manifest's own folder.  Never a nearer file in a subfolder: a pull
   request could add ``sub/.ftmanifest/allowed_signers`` and sign with its own
   key, so there is one trust file per repository, one path to protect.

Backups are judged by the project, never by the storage being checked:
``choose_backup_trust_file`` takes the same ``--trust`` and
``$FTMANIFEST_TRUST_FILE``, else searches from the current folder (the
project that runs the command), not from the backups folder, and refuses a
trust file whose real path lies inside the backups folder whoever named it:
whoever can write the backups could have written it.

The work tree root is what ``git rev-parse --show-toplevel`` says (without a
shell, with a timeout and no optional locks), so an empty ``.git`` file
planted in /tmp makes no root; and a found trust file passes ssh's StrictModes
check (``_files.check_strict_modes``) up to the root.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ftmanifest.probe.git import repository_root
from ftmanifest.signing._files import check_strict_modes
from ftmanifest.signing.errors import InsecureTrustPathError, TrustFileNotFoundError

TRUST_ENV = "FTMANIFEST_TRUST_FILE"
DEFAULT_TRUST = Path(".ftmanifest") / "allowed_signers"
DEFAULT_KEY = Path("~/.ftmanifest/id_ed25519")
"""The private key ``keygen`` writes and ``sign`` uses without ``-f`` / ``--key``."""
TrustHow = Literal["option", "environment", "repository", "folder", "current-folder"]
_WHERE = {
    "repository": "repository root",
    "folder": "manifest's folder (no repo)",
    "current-folder": "current folder (no repository)",
}


@dataclass(frozen=True)
class TrustSource:
    """The trust file chosen for a manifest and how it was chosen."""

    path: Path
    how: TrustHow
    searched_from: Path | None = None
    root: Path | None = None

    def describe(self) -> str:
        if self.how == "option":
            return "given by --trust"
        if self.how == "environment":
            return f"given by ${TRUST_ENV}"
        return f"{_WHERE[self.how]} {self.root}, searched from {self.searched_from}"

    def to_dict(self) -> dict[str, str | None]:
        return {
            "path": str(self.path),
            "how": self.how,
            "searched_from": str(self.searched_from) if self.searched_from else None,
            "root": str(self.root) if self.root else None,
            "description": self.describe(),
        }


def manifest_folder(manifest_path: Path) -> Path:
    """The folder the manifest was named in: absolute, symlinks not resolved."""
    return Path(os.path.abspath(manifest_path)).parent


def choose_trust_file(
    manifest_path: Path,
    trust_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> TrustSource:
    """The trust file for ``manifest_path``; raise ``TrustFileNotFoundError``
    when the search finds none (a given path is checked when it is read)."""
    env = os.environ if environ is None else environ
    if trust_path is not None:
        return TrustSource(trust_path, "option")
    pinned = env.get(TRUST_ENV, "")
    if pinned:
        return TrustSource(Path(pinned).expanduser(), "environment")
    start = manifest_folder(manifest_path)

    root = repository_root(start, env)
    how: TrustHow = "repository" if root is not None else "folder"
    stop = root if root is not None else start
    candidate = stop / DEFAULT_TRUST
    if not candidate.exists():
        raise TrustFileNotFoundError(
            "no trust file (allowed signers) found for this manifest",
            path=str(candidate),
            expected=f"{DEFAULT_TRUST} at the repository root (outside a repository: "
            "in the manifest's folder)",
            observed=f"searched from {start}; "
            + (f"repository root {root}" if root else "not in a git work tree"),
            hint=f"create {DEFAULT_TRUST} with lines like `alice@example.org "
            'namespaces="ftmanifest" ssh-ed25519 AAAA...`, or pass --trust PATH '
            f"(CI: set {TRUST_ENV})",
        )
    check_strict_modes(candidate, stop)
    return TrustSource(candidate, how, searched_from=start, root=stop)


def find_trust_file(manifest_path: Path) -> Path:
    """The path of :func:`choose_trust_file` (kept for callers of the old API)."""
    return choose_trust_file(manifest_path).path


def choose_backup_trust_file(
    backups: Path,
    trust_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    project: Path | None = None,
) -> TrustSource:
    """The trust file for the backups in folder ``backups``: ``--trust``, then
    ``$FTMANIFEST_TRUST_FILE``, else ``.ftmanifest/allowed_signers`` at the
    root of the work tree holding ``project`` (default: the current folder),
    outside a work tree in ``project`` itself.  Never searched from
    ``backups``; one that lies inside it is refused."""
    env = os.environ if environ is None else environ
    pinned = env.get(TRUST_ENV, "")
    if trust_path is not None:
        source = TrustSource(trust_path, "option")
    elif pinned:
        source = TrustSource(Path(pinned).expanduser(), "environment")
    else:
        start = Path(os.path.abspath(project if project is not None else Path.cwd()))
        root = repository_root(start, env)
        stop = root if root is not None else start
        source = TrustSource(
            stop / DEFAULT_TRUST,
            "repository" if root is not None else "current-folder",
            searched_from=start,
            root=stop,
        )
    refuse_inside(source, backups)
    if source.root is not None:
        if not source.path.exists():
            raise _no_backup_trust(source, backups)
        check_strict_modes(source.path, source.root)
    return source


def refuse_inside(
    source: TrustSource,
    folder: Path,
    what: str = "the backups folder being checked",
    writer: str = "whoever can write the backups",
    hint: str = "run from the project that made the backups, or pass --trust PATH naming "
    "the project's allowed_signers; never keep the trust file with the backups",
) -> None:
    """Refuse a trust file whose real path is inside ``folder``, the storage being
    judged (a backups folder, a ledger): trust never comes from what it checks."""
    real = Path(os.path.realpath(source.path))
    inside = Path(os.path.realpath(folder))
    if real != inside and inside not in real.parents:
        return
    named = {"option": "--trust", "environment": f"${TRUST_ENV}"}.get(source.how, "trust file")
    raise InsecureTrustPathError(
        f"refusing the trust file: it lies inside {what}, and {writer} can write it",
        path=str(source.path),
        field=named,
        expected=f"a trust file outside {inside}: the project's {DEFAULT_TRUST}, "
        f"--trust PATH or ${TRUST_ENV}",
        observed=f"{real} is inside {inside}"
        + (f" ({source.describe()})" if source.root is not None else ""),
        hint=hint,
    )


def _no_backup_trust(source: TrustSource, backups: Path) -> TrustFileNotFoundError:
    in_repo = source.how == "repository"
    return TrustFileNotFoundError(
        "no trust file (allowed signers) found for these backups",
        path=str(source.path),
        expected=f"{DEFAULT_TRUST} at the root of the repository holding the current folder "
        "(outside a repository: in the current folder); never in the backups folder",
        observed=f"searched from {source.searched_from}; "
        + (f"repository root {source.root}" if in_repo else "not in a git work tree"),
        hint="run from the project whose .ftmanifest/allowed_signers trusts the backup's "
        f"signer, or pass --trust PATH (CI: set {TRUST_ENV})",
    )
