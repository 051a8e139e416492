"""Field locations: one type from loading to findings to edits.

Layer: pure core (no imports beyond the interpreter, so the lint path stays
fast).  A location is a tuple of keys and list indexes, e.g.
``("data", 0, "digest")``.  The loader records where each one stands in the
file, checks attach one to every finding and error, ``--accept`` and edits
match on it; ``format_loc`` turns it into the text people read and type
(``data[0].digest``).  Text is never parsed back into a location: a key may
contain a dot (``environment.packages["zope.interface"]``).
"""

from __future__ import annotations

Loc = tuple[str | int, ...]


def format_loc(loc: Loc) -> str:
    """``("data", 0, "digest")`` -> ``data[0].digest``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
