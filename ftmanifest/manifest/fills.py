"""The values a manifest's text still marks ``# FILL:``, by field location.

Layer: pure core - manifest (text in, data out; no I/O).  ``init`` writes a ``# FILL:``
comment on the line of every value a person must decide; ``lock`` and
``manifest.edit`` drop it from a value they write; ``lint`` refuses a mark
that is left (FTM003).  Only YAML carries comments a person reads this way:
block mappings and ``- key:`` list items, as ``init`` writes them.
"""

from __future__ import annotations

import re

from ftmanifest.location import Loc, format_loc

MARK = "# FILL:"
_KEY_LINE = re.compile(r"^(\s*)(- )?([A-Za-z_$][\w$.-]*):(.*)$")


class FillMark:
    """A ``# FILL:`` comment: the field it sits on, where, and what to decide."""

    __slots__ = ("loc", "line", "column", "decide")

    def __init__(self, loc: Loc, line: int, column: int, decide: str) -> None:
        self.loc, self.line, self.column, self.decide = loc, line, column, decide


def fill_marks(text: str) -> list[FillMark]:
    """Every ``# FILL:`` comment on a key's line, with the key's location (1-based line)."""
    found: list[FillMark] = []
    stack: list[tuple[int, str | int]] = []
    counters: dict[tuple[str | int, ...], int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        m = _KEY_LINE.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        indent = len(m.group(1)) + (2 if m.group(2) else 0)
        # a "- " line closes the list item before it (kept one column right of its dash)
        level = len(m.group(1)) + 1 if m.group(2) else indent
        while stack and stack[-1][0] >= level:
            stack.pop()
        parent = tuple(part for _, part in stack)
        if m.group(2):  # a new list item under the key above
            index = counters.get(parent, -1) + 1
            counters[parent] = index
            stack.append((indent - 1, index))
            parent = (*parent, index)
        key = m.group(3)
        stack.append((indent, key))
        rest = m.group(4)
        if MARK in rest:
            decide = rest.split(MARK, 1)[1].strip()
            found.append(FillMark((*parent, key), number, indent + 1, decide))
    return found


def fills_in(text: str) -> list[tuple[str, str]]:
    """(field, what to decide) for every ``# FILL:`` comment on a key's line."""
    return [(format_loc(m.loc), m.decide) for m in fill_marks(text)]
