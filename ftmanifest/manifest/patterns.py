"""Patterns shared by the schema types and the checks that run without pydantic.

Layer: pure core - manifest (pure; imports only ``re``, so ``lint`` on the pre-commit
path can use it without building models).
"""

from __future__ import annotations

import re

COMMIT_PATTERN = r"^[0-9a-f]{40}$"
COMMIT_RE = re.compile(COMMIT_PATTERN)
# What pip reads from a requirements line and a shell from a command line
#: a PEP 508 distribution name, a value on one line (none of the
# characters str.splitlines() breaks at, which pip splits its files with), and
# a hub repo id of the form huggingface_hub accepts.
PACKAGE_NAME_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$"
ONE_LINE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"
HUB_REPO_PATTERN = r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"
_NAME_SEPARATORS = re.compile(r"[-_.]+")


def normalize_name(name: str) -> str:
    """PEP 503 normalised form of a distribution name.

    Lowercase, each run of '-', '_' and '.' becomes one '-': how the manifest's
    package names and the installed distributions are compared.
    """
    return _NAME_SEPARATORS.sub("-", name).lower()
