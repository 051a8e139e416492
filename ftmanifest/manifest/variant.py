"""Is a variant fair?  Its declared ``experiment.changes`` against its real
difference from its parent.

Layer: pure core (two loaded manifests in, findings out).  The method: a
variant changes one explainable set of parameters; evaluation, seeds, budget
and data stay the parent's unless declared.  So every field that differs
must be covered by a declared change (``method.r`` covers ``method.r``;
``data[train]`` covers ``data[train].digest``), a declared value must be the
variant's value, and a declared change must really differ.  Fields that
name or describe the experiment itself, where its output goes, and what
``lock`` derives from the method are not parameters and may differ freely:
``EXEMPT``.

    variant.undeclared-change       a field differs and no declared change covers it
    variant.declared-not-changed    a declared change is the parent's value
    variant.declared-value-differs  a declared value is not the variant's
"""

from __future__ import annotations

import json
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.manifest.diff import Change, _same, diff_manifests, field_covers

EXEMPT = (
    "experiment.id",
    "experiment.parent",
    "experiment.hypothesis",
    "experiment.owner",
    "experiment.changes",
    "export.path",
    "method.trainable_params",
)


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def variant_findings(parent: Any, variant: Any) -> list[Finding]:
    """``parent`` and ``variant`` are ``LoadedManifest``s."""
    changes = [
        c
        for c in diff_manifests(parent, variant)
        if not any(field_covers(e, c.field) for e in EXEMPT)
    ]
    declared: dict[str, Any] = dict(variant.manifest.experiment.changes)
    path = str(variant.path)
    parent_id = parent.manifest.experiment.id
    out: list[Finding] = []
    for c in changes:
        if not any(field_covers(k, c.field) for k in declared):
            out.append(_undeclared(c, path, parent_id))
    for key, value in declared.items():
        covered = [c for c in changes if field_covers(key, c.field)]
        where = ("experiment", "changes", key)
        if not covered:
            out.append(Finding.at(
                where, kind="variant", rule="variant.declared-not-changed",
                message=f"{key} is declared changed, but it is the parent's ({parent_id})",
                path=path, expected="a value other than the parent's",
                observed=_show(value),
                hint=f"remove {key} from experiment.changes, or change it in the manifest",
            ))  # fmt: skip
            continue
        exact = next((c for c in covered if c.field == key), None)
        if exact is not None and exact.kind != "removed" and not _same(exact.new, value):
            out.append(Finding.at(
                where, kind="variant", rule="variant.declared-value-differs",
                message=f"{key} is declared as {_show(value)}, but the manifest says "
                f"{_show(exact.new)}",
                path=path, expected=_show(exact.new), observed=_show(value),
                hint=f"make experiment.changes.{key} the value the variant uses",
            ))  # fmt: skip
    return out


def _undeclared(c: Change, path: str, parent_id: str) -> Finding:
    old = "(absent)" if c.kind == "added" else _show(c.old)
    new = "(absent)" if c.kind == "removed" else _show(c.new)
    return Finding(
        kind="variant",
        rule="variant.undeclared-change",
        message=f"{c.field} differs from the parent ({parent_id}) but is not declared "
        "in experiment.changes",
        path=path,
        field=c.field,
        expected=f"{old} (the parent's)",
        observed=new,
        hint=f"declare it (experiment.changes: {{{c.field}: ...}}) or set it back to "
        "the parent's value",
    )
