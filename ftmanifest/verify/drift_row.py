"""One drift row: the ``Finding`` (kind ``drift``) every drift check yields.

Layer: judging rooms - pure core.  The checks of ``drift_env``, ``drift_code`` and
``drift_files`` build their rows here, so each carries the field, the expected and
observed values (as text), a severity and the fix the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ftmanifest.findings import Finding

if TYPE_CHECKING:
    from ftmanifest.findings import Severity
    from ftmanifest.location import Loc


def row(
    rule: str,
    loc: Loc,
    message: str,
    expected: object,
    observed: object,
    hint: str,
    severity: Severity = "error",
    path: str | None = None,
) -> Finding:
    return Finding.at(
        loc,
        kind="drift",
        rule=rule,
        message=message,
        path=path,
        expected=None if expected is None else str(expected),
        observed=None if observed is None else str(observed),
        severity=severity,
        hint=hint,
    )
