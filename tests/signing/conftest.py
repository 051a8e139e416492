"""Make ``signing_helpers`` importable under ``--import-mode=importlib``.

The suite runs without ``tests/__init__.py`` packages, so plain helper modules
are not on ``sys.path``; load this folder's one helper module by file path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "signing_helpers", Path(__file__).with_name("signing_helpers.py")
)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("signing_helpers", _module)
_spec.loader.exec_module(_module)


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_pinned_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI that pins trust with FTMANIFEST_TRUST_FILE must not change these tests."""
    monkeypatch.delenv("FTMANIFEST_TRUST_FILE", raising=False)
