"""Fields that left the manifest, each refused with where it went.

Layer: pure core - manifest (pure).  ``experiment.status`` and
``experiment.status_reason`` said what happened to an experiment inside the signed file,
so recording that a run was abandoned broke its signature.  What happened now lives in
the run records beside the manifest (``ftmanifest runs M --mark abandoned --reason
...``); a manifest that still carries these fields gets one finding per field that says
so, instead of a bare "unknown key".
"""

from __future__ import annotations

from ftmanifest.findings import Finding
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest.load import Document

_RUNS = (
    "remove this line: what happened to an experiment goes to its run records, not the "
    "signed manifest (to record an abandoned or invalid attempt: "
    "ftmanifest runs {path} --mark abandoned --reason TEXT)"
)

MOVED: dict[Loc, str] = {
    ("experiment", "status"): _RUNS,
    ("experiment", "status_reason"): _RUNS,
}


def moved_findings(doc: Document) -> list[Finding]:
    """One finding per moved field present in ``doc``."""
    found = []
    for loc, hint in MOVED.items():
        node = _get(doc.data, loc)
        if node is _ABSENT:
            continue
        line, col = doc.position(loc)
        found.append(
            Finding.at(
                loc,
                kind="schema",
                rule="FTM000",
                message=f"{format_loc(loc)} is no longer part of the manifest",
                path=str(doc.path),
                line=line,
                column=col,
                expected="absent",
                observed=repr(node)[:80],
                hint=hint.format(path=doc.path),
            )
        )
    return found


_ABSENT = object()


def _get(data: object, loc: Loc) -> object:
    node = data
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node
