"""What the hashing tests share: a private stat cache per test, and files written
old enough to be cached."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

EMPTY_SHA256 = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
HOUR_NS = 3600 * 10**9


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(tmp_path / "cache"))


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write(path: Path, data: bytes, *, old: bool = True) -> Path:
    """Write ``data``; ``old`` puts mtime an hour back so the cache may keep it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if old:
        t = time.time_ns() - HOUR_NS
        os.utime(path, ns=(t, t))
    return path


class Hook:
    """A progress sink that runs ``action`` once, after the first chunk is read."""

    def __init__(self, action=None) -> None:  # type: ignore[no-untyped-def]
        self.action = action
        self.total = 0
        self.done = 0

    def add_total(self, nbytes: int) -> None:
        self.total += nbytes

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        if self.action is not None:
            action, self.action = self.action, None
            action()


def jsonl(n: int, *, blank_every: int = 0) -> bytes:
    lines = []
    for i in range(n):
        lines.append(b'{"i": %d, "text": "%s"}\n' % (i, b"w" * (i % 300)))
        if blank_every and i % blank_every == 0:
            lines.append(b"  \r\n")
    return b"".join(lines)
