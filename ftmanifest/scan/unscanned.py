"""The one ``not-scanned`` finding (what could not be read or judged), and ``malformed``.

Layer: judging rooms - scanner core (pure).  Always severity error, never silently
clean.  A whole file that was not scanned says why in its message; a part of an artifact
(a pickle past a cap, an archive member) names the member.
"""

from __future__ import annotations

from pathlib import Path

from ftmanifest.findings import Finding

CAP_HINT = "raise the cap or inspect the file by hand; it was not checked in full"
REEXPORT_HINT = "re-export it with the library that wrote it; do not load a file its format refuses"


def not_scanned(path: Path | str, why: str, hint: str | None = None) -> Finding:
    """A file that was not scanned: ``not scanned: <why>``, rule ``scan.not-scanned``."""
    return _finding(path, f"not scanned: {why}", "scan.not-scanned", hint)


def part_not_scanned(
    path: Path | str,
    message: str,
    member: str | None = None,
    rule: str = "scan.over-cap",
    hint: str | None = CAP_HINT,
) -> Finding:
    """Part of an artifact that was not judged in full; ``member`` names it (None: the file)."""
    return _finding(path, message, rule, hint, field=member, extra={"member": member})


def _finding(
    path: Path | str,
    message: str,
    rule: str,
    hint: str | None,
    *,
    field: str | None = None,
    extra: dict[str, str | None] | None = None,
) -> Finding:
    finding = Finding(
        kind="not-scanned",
        rule=rule,
        message=message,
        path=str(path),
        field=field,
        severity="error",
        hint=hint,
    )
    return finding._replace(extra=extra) if extra is not None else finding


def malformed(
    where: str,
    rule: str,
    message: str,
    member: str | None = None,
    *,
    expected: str | None = None,
    observed: str | None = None,
    hint: str | None = None,
) -> Finding:
    """An artifact (or one member of it) that is not what its format says: an error."""
    return Finding(
        expected=expected,
        observed=observed,
        hint=hint,
        kind="malformed",
        rule=rule,
        message=message + (f" in {member}" if member else ""),
        path=where,
        field=member,
        severity="error",
        extra={"member": member},
    )
