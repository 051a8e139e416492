"""Patterns shared by the schema types and the checks that run without pydantic.

Layer: manifest (pure; imports only ``re``, so ``lint`` on the pre-commit path
can use it without building models).
"""

from __future__ import annotations

import re

COMMIT_PATTERN = r"^[0-9a-f]{40}$"
COMMIT_RE = re.compile(COMMIT_PATTERN)
_NAME_SEPARATORS = re.compile(r"[-_.]+")


def normalize_name(name: str) -> str:
    """PEP 503 normalised form of a distribution name.

    Lowercase, each run of '-', '_' and '.' becomes one '-': how the manifest's
    package names and the installed distributions are compared.
    """
    return _NAME_SEPARATORS.sub("-", name).lower()
