"""Scan tests: keep the stat and scan-result caches out of the user's home."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> Path:
    d = tmp_path_factory.mktemp("ftm-cache")
    d.chmod(0o700)
    monkeypatch.setenv("FTMANIFEST_CACHE_DIR", str(d))
    return d
