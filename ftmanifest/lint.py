"""Lint a manifest: is it complete enough to reproduce the run?

Layer: pure core.  The pinning rules (``manifest.lint_rules``) read the schema-valid
plain data of a ``Document`` (no pydantic, no I/O) and yield problems;
``lint_document`` turns them into located ``Finding`` records and adds the values
still marked ``# FILL:``; ``lint_paths`` does so for files, a file that cannot be read
or does not match the schema yielding its ``FTM000`` findings.  Rule ids are stable:
never renumber, only add.
"""

from __future__ import annotations

import re

from ftmanifest.errors import FtManifestError, ManifestInvalidError
from ftmanifest.findings import Finding, sort_findings
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest import load_document
from ftmanifest.manifest.fills import MARK, fill_marks
from ftmanifest.manifest.lint_rules import RULES, shown, value_at
from ftmanifest.manifest.load import Document

TYPE_CHECKING = False  # no runtime `typing` on the pre-commit path (see findings.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

# --- values left to fill ---------------------------------------------------
# Not in RULES: it reads the text, not the data.  ``init`` marks each value a
# person must decide with a ``# FILL:`` comment on its line (``lock`` and
# ``manifest.edit`` drop the mark from a value they write).  A mark left means
# that value was never decided, whatever stands there: a placeholder is not a
# choice.  A mark where another rule already refuses the field adds nothing.

FILL_RULES = {"FTM003": "no value is left marked '# FILL:'"}


def _fills_left(doc: Document, found: list[Finding]) -> list[Finding]:
    if doc.format != "yaml" or MARK not in doc.text:
        return []
    taken = [f.loc for f in found if f.loc is not None]
    out = []
    for mark in fill_marks(doc.text):
        if doc.positions.get(mark.loc, (None,))[0] != mark.line:
            continue  # not a key of the document (a line inside a block string)
        if any(t[: len(mark.loc)] == mark.loc or mark.loc[: len(t)] == t for t in taken):
            continue
        value = value_at(doc.data, *mark.loc)
        out.append(
            Finding.at(
                mark.loc,
                kind="lint",
                rule="FTM003",
                message=f"{format_loc(mark.loc)} is still to fill: {mark.decide}",
                path=str(doc.path),
                line=mark.line,
                column=mark.column,
                expected="a decided value, its '# FILL:' comment removed",
                observed=f"{shown(value)}, still marked FILL",
                hint=f"write the value of {format_loc(mark.loc)} and delete its '# FILL:' comment",
            )
        )
    return out


# --- variants ----------------------------------------------------
# Not in RULES: a variant is judged against its parent, found beside it or in
# the ledger, so these read files and build the pydantic models of both (the
# judgment ``verify`` makes, ``ftmanifest.ledger.parents``).  Only a manifest
# that sets experiment.parent pays for it; every other stays on the fast path.
# A parent found nowhere is a warning, not an error: committing a variant
# before its parent's file (or before the parent is planned) is legitimate,
# and verify still refuses a variant it cannot judge.

VARIANT_RULES = {
    "FTM080": "a variant declares every difference from its parent in experiment.changes",
    "FTM081": "a variant's parent is beside it or in the ledger (warning)",
}


_FIELD_PART_RE = re.compile(r'\.?([^.\[\]"]+)|\[("(?:[^"\\]|\\.)*"|[^\]]*)\]')


def field_loc(data: Any, field: str) -> Loc:
    """The data location of a diff field (``data[train].digest`` -> ``("data", 0,
    "digest")``), as far as it exists in ``data``: where to point the finding."""
    import json

    loc: list[str | int] = []
    node = data
    for m in _FIELD_PART_RE.finditer(field):
        key: str | int = m.group(1) if m.group(1) is not None else m.group(2)
        if m.group(1) is None and isinstance(key, str) and key.startswith('"'):
            key = json.loads(key)
        if isinstance(node, list):
            names = [value_at(i, "name") or value_at(i, "path") for i in node]
            if key in names:
                key = names.index(key)
            elif isinstance(key, str) and key.isdigit():
                key = int(key)
            else:
                break
        elif not isinstance(node, dict) or key not in node:
            break
        loc.append(key)
        node = value_at(node, key)
    return tuple(loc)


def lint_document(doc: Document) -> list[Finding]:
    """Run every rule on a schema-valid document."""
    found = []
    for rule in RULES.values():
        for p in rule.check(doc.data):
            line, col = doc.position(p.loc)
            found.append(
                Finding(
                    kind="lint",
                    rule=rule.id,
                    message=p.message,
                    path=str(doc.path),
                    line=line,
                    column=col,
                    field=format_loc(p.loc) or None,
                    loc=p.loc,
                    expected=p.expected,
                    observed=p.observed,
                    hint=p.hint,
                )
            )
    found += _fills_left(doc, found)
    return sort_findings(found)


def is_variant(doc: Document) -> bool:
    """The document names a parent experiment (``experiment.parent``)."""
    return isinstance(value_at(doc.data, "experiment", "parent"), str)


def lint_paths(
    paths: list[str], checks: Sequence[Callable[[Document], list[Finding]]] = ()
) -> tuple[list[Finding], int]:
    """Lint files: (every finding, number of files that were unusable).

    A file that cannot be read or does not match the schema yields its
    ``FTM000`` findings instead of lint findings.  ``checks`` run on each
    schema-valid document after the rules: the variant check
    (``ledger.parents.variant_lint``) reads the parent's manifest, which this
    pure layer does not; ``ftmanifest.lint_paths`` passes it.
    """
    findings: list[Finding] = []
    unusable = 0
    for path in paths:
        try:
            doc = load_document(path)
            findings.extend(lint_document(doc))
            for check in checks:
                findings.extend(check(doc))
        except ManifestInvalidError as exc:
            unusable += 1
            findings.extend(exc.problems)
        except FtManifestError as exc:
            unusable += 1
            findings.append(
                Finding(
                    kind="input",
                    rule="FTM000",
                    message=exc.message,
                    path=exc.path or path,
                    line=exc.line,
                    column=exc.column,
                    field=exc.field,
                    expected=exc.expected,
                    observed=exc.observed,
                    hint=exc.hint,
                )
            )
    return findings, unusable
