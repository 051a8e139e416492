"""Careful file writing: never leave a half-written file.

Layer: edge (I/O helpers shared by every writer).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(
    path: str | Path, data: bytes, *, mode: int = 0o644, exclusive: bool = False
) -> None:
    """Write to a temp file in the same folder, fsync, then rename over ``path``.

    ``exclusive`` refuses to replace an existing file (FileExistsError).
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if exclusive and target.exists():
        raise FileExistsError(str(target))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive:
            os.link(tmp, target)  # fails if it appeared meanwhile
            os.unlink(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(folder)


def atomic_write_text(path: str | Path, text: str, **kw: object) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), **kw)  # type: ignore[arg-type]


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
