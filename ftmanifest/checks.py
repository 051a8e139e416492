"""Named checks: one small protocol for every set of checks that yields findings.

Layer: pure core.  A check has a name, says which parts of its subject it reads
(``needs``), and turns a manifest and that subject into ``Finding`` records.
A set of checks is one registry dict, name -> check, run in order by
``run_checks``.  Drift (``drift.DRIFT_CHECKS``, over ``observe.Observed``) is
the first client; preflight, audit and data checks are meant to be more
registries of the same shape, each in its own room.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ftmanifest.errors import UsageError
from ftmanifest.findings import Finding

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest


class Check(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def needs(self) -> tuple[str, ...]:  # attributes of the subject the check reads
        ...

    def run(self, manifest: Manifest, subject: Any) -> Iterable[Finding]: ...


@dataclass(frozen=True)
class FunctionCheck:
    """A check written as a function ``(manifest, subject) -> findings``."""

    name: str
    needs: tuple[str, ...]
    fn: Callable[[Manifest, Any], Iterable[Finding]]

    def run(self, manifest: Manifest, subject: Any) -> Iterable[Finding]:
        return self.fn(manifest, subject)


def registry(*checks: Check) -> dict[str, Check]:
    """Checks by name, in the order given; a repeated name is a bug, refused at once."""
    out: dict[str, Check] = {}
    for check in checks:
        if check.name in out:
            raise ValueError(f"two checks are named {check.name!r}")
        out[check.name] = check
    return out


def run_checks(
    checks: Mapping[str, Check],
    manifest: Manifest,
    subject: Any,
    *,
    only: Iterable[str] | None = None,
) -> list[Finding]:
    """Run ``checks`` (or the ones named in ``only``) in order; their findings, concatenated.

    A check whose ``needs`` the subject does not have is a bug in the
    registry, not a finding: it raises rather than quietly checking nothing.
    """
    names = list(checks) if only is None else list(only)
    unknown = [n for n in names if n not in checks]
    if unknown:
        raise UsageError(
            f"unknown check(s): {', '.join(unknown)}",
            field="--only",
            expected=", ".join(checks),
            observed=", ".join(unknown),
            hint="name one of the checks listed",
        )
    rows: list[Finding] = []
    for name in names:
        check = checks[name]
        missing = [n for n in check.needs if not hasattr(subject, n)]
        if missing:
            raise AttributeError(f"check {name!r} needs {missing} of {type(subject).__name__}")
        rows.extend(check.run(manifest, subject))
    return rows
