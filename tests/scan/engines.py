"""The scan engines the tests run: ``re`` always, ``hyperscan`` where it imports.

Hyperscan is an optional extra; where it is absent its cases are skipped with
the reason, not failed (the ``re`` engine is the reference and always runs).
"""

from __future__ import annotations

import pytest

try:
    import hyperscan  # noqa: F401  (an install whose library fails to load counts as absent)
except ImportError:  # pragma: no cover - depends on the environment
    HAS_HYPERSCAN = False
else:
    HAS_HYPERSCAN = True

needs_hyperscan = pytest.mark.skipif(
    not HAS_HYPERSCAN,
    reason="hyperscan is not importable here (pip install hyperscan); the re engine still runs",
)
ENGINES = ["re", pytest.param("hyperscan", marks=needs_hyperscan)]  # for parametrize
AVAILABLE = ["re", "hyperscan"] if HAS_HYPERSCAN else ["re"]  # for a loop inside one test
