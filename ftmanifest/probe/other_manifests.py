"""Probe: which changed files of a repository are another manifest's, not training code.

Layer: probes and runtime.  Several manifests may live in one repository.
Locking one rewrites it, signing it writes its envelope beside it, and
committing them moves HEAD; for every *other* manifest of the repository those
files are not training code, since another manifest's content never changes
what this run trains (its run records are in the repository's one ledger,
allowed already).  A changed path counts as another manifest's file when it is
present on one side of the change at least (the pinned commit and the work
tree, or two commits) and each side is absent or

* a manifest: named ``*.yaml``, ``*.yml``, ``*.json`` or ``*.toml`` and parsed
  (UTF-8, the manifest loader's own parser) as a mapping with a top-level
  ``ftmanifest`` key; or
* a signature envelope: named ``<name>.<one of those>.sig.json`` and a JSON
  object with the DSSE keys ``payloadType``, ``payload`` and ``signatures``;

a regular file on both sides (not a symlink, not a submodule).  Both sides are
read, so a training config committed as plain YAML that now reads as a manifest
is still code: only a file that *was* a manifest may change as one.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ftmanifest.errors import FtManifestError
from ftmanifest.manifest.load import MAX_BYTES, decode_utf8, detect_format, parse_text
from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe.git_content import EXECUTABLE, REGULAR, read_blobs

SUFFIXES = (".yaml", ".yml", ".json", ".toml")
ENVELOPE = ".sig.json"
_DSSE_KEYS = frozenset({"payloadType", "payload", "signatures"})
_FILE_MODES = (REGULAR, EXECUTABLE)


class Side(NamedTuple):
    """One side of a change: the object id and mode, or None for an absent file."""

    blob: str | None
    mode: str | None


def may_be(path: str) -> bool:
    """Whether ``path``'s name is one a manifest or an envelope may have (read nothing)."""
    name = path.rsplit("/", 1)[-1].lower()
    if name.endswith(ENVELOPE):
        name = name[: -len(ENVELOPE)]
    return name.endswith(SUFFIXES) and "\ufffd" not in path


def is_manifest_file(path: str, data: bytes) -> bool:
    """``data`` is a manifest or a manifest's envelope, by ``path``'s name and its content."""
    if not may_be(path) or len(data) > MAX_BYTES:
        return False
    if path.lower().endswith(ENVELOPE):
        try:
            doc = json.loads(data)
        except ValueError:
            return False
        return isinstance(doc, dict) and _DSSE_KEYS <= doc.keys()
    try:
        parsed = parse_text(decode_utf8(data, path), path, detect_format(path)).data
    except (FtManifestError, RecursionError):
        return False
    return isinstance(parsed, dict) and "ftmanifest" in parsed


def between_commits(
    root: str, changes: Sequence[tuple[str, Side, Side]], ctx: ProbeContext
) -> set[str]:
    """The paths of ``changes`` ((path, old side, new side) from two commits) that
    are another manifest's files on both sides."""
    wanted = [(p, a, b) for p, a, b in changes if may_be(p) and _file_modes(a, b)]
    blobs = read_blobs(root, [s.blob for _p, a, b in wanted for s in (a, b) if s.blob], ctx,
                       limit=MAX_BYTES)  # fmt: skip
    return {
        p
        for p, a, b in wanted
        if all(s.blob is None or is_manifest_file(p, blobs.get(s.blob, b"\0")) for s in (a, b))
    }


def in_worktree(
    root: str, changes: Iterable[tuple[str, str | None]], ctx: ProbeContext
) -> set[str]:
    """The paths of ``changes`` ((path, the commit's blob id or None when the commit
    has no such file)) whose work-tree file and committed blob are both another
    manifest's files (or the commit has none)."""
    wanted = [(p, blob) for p, blob in changes if may_be(p)]
    blobs = read_blobs(root, [b for _p, b in wanted if b], ctx, limit=MAX_BYTES)
    found = set()
    for path, blob in wanted:
        if blob is not None and not is_manifest_file(path, blobs.get(blob, b"\0")):
            continue
        data = _read_regular(os.path.join(root, path))
        if data is not None and is_manifest_file(path, data):
            found.add(path)
    return found


def _file_modes(*sides: Side) -> bool:
    present = [s for s in sides if s.blob is not None]
    return bool(present) and all(s.mode in _FILE_MODES for s in present)


def _read_regular(path: str) -> bytes | None:
    """The bytes of a regular file (not through a symlink, never blocking), at most
    ``MAX_BYTES + 1``; None for anything else."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, total = [], 0
        while total <= MAX_BYTES and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
