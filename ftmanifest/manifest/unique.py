"""What the JSON Schema cannot say: names and paths that must be unique.

Layer: pure core - manifest (pure).  Runs on the schema-valid plain data of a
``Document`` (no pydantic, so the pre-commit hook stays fast) and returns one
located ``Finding`` per repeat, naming both places.  ``load_document``
refuses a manifest with any of them, so lint, lock, verify and the Trainer
guard all see one verdict.

Why it matters: results once keyed by ``data[].name`` let a second
entry with the same name overwrite the first, so the first file was never
hashed.  Nothing downstream keys by a user-chosen name any more, but two
entries that other sections cannot tell apart are still a mistake.
"""

from __future__ import annotations

from ftmanifest.findings import Finding
from ftmanifest.location import Loc, format_loc
from ftmanifest.manifest.load import Document

TYPE_CHECKING = False  # no runtime `typing` on the lint path (see findings.py)
if TYPE_CHECKING:
    from typing import Any

# (list location, key inside each item, what the item is called)
UNIQUE_KEYS: tuple[tuple[Loc, str, str], ...] = (
    (("data",), "name", "data name"),
    (("model", "files"), "path", "model file path"),
)


def _items(data: Any, loc: Loc) -> list[Any]:
    node = data
    for part in loc:
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, list) else []


def unique_findings(doc: Document) -> list[Finding]:
    """One finding per item whose key repeats an earlier item's key."""
    found: list[Finding] = []
    for list_loc, key, what in UNIQUE_KEYS:
        first: dict[str, Loc] = {}
        for i, item in enumerate(_items(doc.data, list_loc)):
            value = item.get(key) if isinstance(item, dict) else None
            if not isinstance(value, str):
                continue
            loc: Loc = (*list_loc, i, key)
            earlier = first.setdefault(value, loc)
            if earlier == loc:
                continue
            line, col = doc.position(loc)
            first_line, _ = doc.position(earlier)
            where = f"line {first_line}" if first_line else format_loc(earlier)
            found.append(
                Finding(
                    kind="schema",
                    rule="FTM000",
                    message=f"{what} {value!r} is used twice: {format_loc(earlier)} ({where}) "
                    f"and {format_loc(loc)}",
                    path=str(doc.path),
                    line=line,
                    column=col,
                    field=format_loc(loc),
                    loc=loc,
                    expected=f"a {what} no other entry uses",
                    observed=f"{value!r}, also at {format_loc(earlier)} ({where})",
                    hint="rename one of them, or remove the repeated entry",
                )
            )
    return found
