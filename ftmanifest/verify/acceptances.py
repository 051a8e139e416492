"""Acceptances: a drift row accepted on purpose, with its reason.

Layer: judging rooms (verify).  ``apply_acceptances`` splits the rows of a
verify into those that remain and those accepted; each acceptance names
exactly one row (or one data entry's digest and records) and carries a
reason, so one ``--accept`` can never wave a whole section through.  The
Trainer guard, ``verify`` and distributed verify all accept through here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ftmanifest.errors import UsageError
from ftmanifest.findings import Finding
from ftmanifest.manifest.diff import field_covers

UNACCEPTABLE = ("signature",)
# Whole sections: an acceptance names one row, never one of these.
SECTIONS = frozenset(
    {
        "experiment",
        "model",
        "model.files",
        "environment",
        "environment.packages",
        "environment.backend",
        "environment.backend.devices",
        "environment.env_vars",
        "environment.code",
        "data",
        "evaluation",
        "evaluation.baseline",
        "security",
        "seeds",
        "training",
        "method",
        "export",
    }
)
# Rules whose rows are never accepted: a model file that could not be checked
# at all (accepting it would accept whatever is there), and a pin that is empty
# or not one exact version (the fix is to pin it: `ftmanifest lock`).
NEVER_ACCEPTED = frozenset({"drift.model-unchecked", "drift.package-unpinned", "drift.unpinned"})


@dataclass
class Acceptance:
    finding: Finding
    reason: str


_ONE_ENTRY = re.compile(r"^data\[\d+\]$")  # one data entry: its digest and records rows


def _covers(accepted: str, field_path: str | None) -> bool:
    """An acceptance names one row (its field), or one data entry's digest and records
    (``data[2]``; not its cleaning or transform scripts, which are code)."""
    if not field_path:
        return False
    if field_path == accepted:
        return True
    return bool(_ONE_ENTRY.match(accepted)) and field_path in (
        accepted + ".digest",
        accepted + ".records",
    )


def _too_broad(name: str, findings: list[Finding]) -> bool:
    """``data``, ``environment``, ``model.files``: names that would cover a section."""
    if _ONE_ENTRY.match(name):
        return False
    if name in SECTIONS:
        return True
    return any(
        f.field and f.field != name and f.field.startswith((name + ".", name + "["))
        for f in findings
    )


def apply_acceptances(
    findings: list[Finding], accept: Mapping[str, str]
) -> tuple[list[Finding], list[Acceptance], list[str]]:
    """Split drift rows into remaining and accepted; warn about unused acceptances.

    Each acceptance covers exactly one row (or one data entry's rows) and
    needs a reason that is not blank; anything broader is a usage error, so
    one ``--accept`` can never wave a whole section through.
    """
    for name, reason in accept.items():
        if name.split(".")[0].split("[")[0] in UNACCEPTABLE:
            raise UsageError(
                f"'{name}' cannot be accepted",
                field="--accept",
                observed=name,
                hint="a signature problem is fixed by signing; use --no-signature to skip the "
                "check (with a warning)",
            )
        if _too_broad(name, findings):
            rows = [f.field for f in findings if f.field and field_covers(name, f.field)]
            raise UsageError(
                f"--accept {name} names a section, not one row",
                field="--accept",
                expected="the field of one drift row (e.g. data[1].digest, "
                "environment.packages.torch) or one data entry (data[1])",
                observed=name + (f" (would cover {', '.join(rows[:5])})" if rows else ""),
                hint="accept each row on its own, with its own --reason",
            )
        if not reason or not reason.strip():
            raise UsageError(
                f"--accept {name}: the reason is blank",
                field="--reason",
                expected="a reason a reviewer can read",
                observed=repr(reason),
                hint=f"ftmanifest verify M --accept {name} --reason 'why this is fine'",
            )
    remaining, accepted, used, refused = [], [], set(), set()
    for f in findings:
        hit = next((a for a in accept if _covers(a, f.field)), None)
        if hit is not None and f.rule in NEVER_ACCEPTED:
            refused.add(hit)
            remaining.append(f)
        elif hit is None:
            remaining.append(f)
        else:
            used.add(hit)
            accepted.append(Acceptance(f, accept[hit].strip()))
    warnings = [
        f"--accept {a}: this row cannot be accepted; fix it"
        if a in refused
        else f"--accept {a}: no drift on that field"
        for a in accept
        if a not in used
    ]
    return remaining, accepted, warnings
