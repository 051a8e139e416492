"""A split that is a folder of shards: its files, in one order, read as one split.

Layer: judging rooms - data (edge: lists the folder).  A data entry may be a folder of
record files (``part-00000.jsonl`` ...), as trainers load them (``data_files`` a folder
or a glob).  ``shard_names`` lists every file below it, sorted by their '/'-separated
relative names, so every reader and every rank numbers the split's records the same way:
record numbers run on across the shards, line numbers are each shard's own, and a record
is named by its shard and line.

Every file below the folder (but ``.git``, which its tree digest skips too) is a
shard, read in the entry's ``format`` or, where
none is declared, by its suffix: a file the check cannot read as records (a
README, an index) is a refusal naming it, not skipped, since what the trainer
globs is not known here and the folder's tree digest pins every file.  A symlink
is followed only to a regular file inside the folder; a link that leaves it, a
linked folder, a FIFO or a device is a refusal naming it.

``Marks`` maps a record number back to its shard: the readers note the first
record number of each shard as they reach it.
"""

from __future__ import annotations

import bisect
import os
import stat
from pathlib import Path

from ftmanifest.errors import InputError


def shard_names(folder: Path, loc: tuple[str | int, ...] = ()) -> tuple[str, ...]:
    """The '/'-separated relative names of the files below ``folder``, sorted."""
    top = os.path.realpath(folder)
    out: list[str] = []
    pending = [""]
    while pending:
        rel = pending.pop()
        here = os.path.join(folder, rel) if rel else os.fspath(folder)
        try:
            with os.scandir(here) as it:
                entries = [(e.name, e.is_symlink()) for e in it]
        except OSError as exc:
            raise _refuse(here, loc, f"cannot list it ({exc.strerror or exc})") from exc
        for name, link in entries:
            if name == ".git":
                continue  # as the tree digest skips it: not pinned, not data
            sub = f"{rel}/{name}" if rel else name
            path = os.path.join(here, name)
            try:
                st = os.stat(path)
            except OSError as exc:
                raise _refuse(path, loc, f"cannot stat it ({exc.strerror or exc})") from exc
            if link:
                target = os.path.realpath(path)
                if not stat.S_ISREG(st.st_mode) or os.path.commonpath([top, target]) != top:
                    raise _refuse(path, loc, f"a symlink to {target}, outside the split's "
                                  "folder or not a file")  # fmt: skip
            if stat.S_ISDIR(st.st_mode):
                pending.append(sub)
            elif stat.S_ISREG(st.st_mode):
                out.append(sub)
            else:
                raise _refuse(path, loc, "not a regular file (a FIFO, socket or device)")
    if not out:
        raise InputError(
            f"the data folder {folder} holds no files",
            path=str(folder),
            loc=loc or None,
            expected="record files (JSONL, CSV, ...) below the folder",
            observed="an empty folder",
            hint="restore the shards, or point the entry at the split's data",
        )
    out.sort()
    return tuple(out)


def _refuse(path: str, loc: tuple[str | int, ...], why: str) -> InputError:
    return InputError(
        f"a shard of a data folder cannot be read: {why}",
        path=path,
        loc=loc or None,
        expected="regular record files inside the split's folder",
        observed=why,
        hint="remove it from the folder, or copy the data it points to into the folder",
    )


class Marks:
    """The first record number of each shard, noted in reading order."""

    def __init__(self) -> None:
        self.firsts: list[int] = []
        self.names: list[str] = []

    def note(self, first: int, name: str) -> None:
        """Shard ``name``'s records start at ``first`` (1-based)."""
        if self.firsts and self.firsts[-1] == first:
            self.names[-1] = name  # the shard before held no record
            return
        self.firsts.append(first)
        self.names.append(name)

    def shard_of(self, record: int) -> str:
        """The shard holding record ``record``; "" for a split that is one file."""
        i = bisect.bisect_right(self.firsts, record) - 1
        return self.names[i] if i >= 0 else ""


def shard_path(folder: Path, name: str) -> Path:
    """Shard ``name`` ('/'-separated) of ``folder``."""
    return folder.joinpath(*name.split("/"))
