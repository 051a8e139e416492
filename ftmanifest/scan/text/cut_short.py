"""A value after a secret-like key that is a provider's token cut short.

Layer: judging rooms - pure core (scan rules).  The generic assignment rule warns on
any random-looking value after ``*_TOKEN=``.  When that value begins with a
provider's prefix (``sm_pat_``, ``ghp_``, ``glpat-``) but stops before the
provider's documented length, in the provider's own alphabet, it is that token
shortened, as documentation and logs show one, and it authenticates nothing: the
provider's format rule is the authority on it, and the generic rule stays quiet.

Only a clear shortening is quiet: at most four fifths of the format's shortest length.
A value of the prefix in any other shape (nearly as long, longer, a character outside
the alphabet, a part the format lacks) is still reported, since a provider may have
changed its format or issue tokens of lengths its rule does not name.  A JWT is not a
prefix and a length: its last part may be empty (an unsigned token, ``alg: none``, is a
token all the same), so its rule is left out.  Whether the format "could go on" is
asked of the format rule's own regex: it does not match the value, but matches the
value extended by one repeated character of a common alphabet, past the value's end;
the fewest such characters give the format's shortest length.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ftmanifest.scan.text.rule import Rule

GENERIC = "secret.generic-assignment"
_WHOLE_WHEN_SHORT = frozenset({"secret.jwt"})
_FILLS = (b"A", b"a", b"0", b"f")
_REACH = 256  # the longest format a shortened value is extended towards

Formats = tuple[tuple[bytes, "re.Pattern[bytes]"], ...]


def formats(rules: Iterable[Rule]) -> Formats:
    """(prefix, regex) of each secret rule whose match starts at its keyword."""
    out: list[tuple[bytes, re.Pattern[bytes]]] = []
    for r in rules:
        if r.kind != "secret" or r.id in _WHOLE_WHEN_SHORT | {GENERIC} or r.back or r.anchors:
            continue
        rx = re.compile(r.regex.encode(), re.I if r.ignore_case else 0)
        out.extend((kw.encode(), rx) for kw in r.keywords)
    return tuple(out)


def cut_short(value: bytes, table: Formats) -> bool:
    """``value`` begins with a format's prefix and is that format shortened by a fifth of
    its shortest length or more: a value nearly as long as the format's minimum may be a
    whole token of a provider whose tokens vary more than the rule says."""
    low = value.lower()
    for prefix, rx in table:
        if not low.startswith(prefix) or rx.match(value):
            continue
        for fill in _FILLS:
            k = _fewest(rx, value, fill)
            if k is not None and 5 * len(value) <= 4 * (len(value) + k):
                return True
    return False


def _fewest(rx: re.Pattern[bytes], value: bytes, fill: bytes) -> int | None:
    """The fewest ``fill`` characters after ``value`` that ``rx`` matches past its end,
    by bisection (a format of a prefix and a length matches from some count on): a
    file of many such values costs a few matches each, not one per count."""
    m = rx.match(value + fill * _REACH)
    if m is None or m.end() <= len(value):
        return None
    lo, hi = 1, m.end() - len(value)  # hi matches: the greedy match fits in it
    while lo < hi:
        mid = (lo + hi) // 2
        if rx.match(value + fill * mid):
            hi = mid
        else:
            lo = mid + 1
    return lo if rx.match(value + fill * lo) else None
