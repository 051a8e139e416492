"""pre-commit entry points (see .pre-commit-hooks.yaml and hooks/).

Layer: edge.  pre-commit may call a hook with no files when none matched.
"""

from __future__ import annotations

from collections.abc import Sequence


def lint_main(argv: Sequence[str]) -> int:
    from ftmanifest.cli import main

    files = [a for a in argv if not a.startswith("-")]
    if not files:
        return 0
    return main(["lint", *argv])
