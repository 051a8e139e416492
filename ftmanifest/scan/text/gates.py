"""Hyperscan gates that leave out what the rule's own validator refuses.

Layer: judging rooms - pure core (scan rules).  A gate (``Rule.gate``) is a necessary
condition of a finding: Hyperscan reports its matches, and only keyword hits near one
reach Python.  The gates here are tighter than the rule's regex: they also leave out
text that the validator refuses whatever follows it (a value that starts with
``os.environ``, an address whose local part is ``git``), so that code lines full of
such text cost Hyperscan's time only.  They are written out so that every finding
still has a gate match: ``tests/scan/validator_gates_test.py`` compares both engines
(the ``re`` engine runs no gate) on values built around each left-out prefix.
"""

from __future__ import annotations

import re

__all__ = ["not_led_by"]


def not_led_by(literals: tuple[str, ...], excluded: str, n: int) -> str:
    """A regex for the first ``n`` bytes of a value, a run of ``[^excluded]``, that
    does not start with one of ``literals`` (ASCII, compared without case).

    Each branch follows a common prefix of the literals and leaves it by a byte that
    continues none of them, then reads the rest of the ``n`` bytes.  A value that
    ends inside a literal's prefix after ``n`` bytes has no branch: the caller must
    know its validator refuses it (for the generic assignment, the literals hold no
    digit and a value without one is refused).  A value that starts with a literal
    has no branch either: that is what the caller's validator refuses.
    """
    trie: dict[str, dict] = {}
    stop = re.compile(f"[{excluded}]")
    for lit in literals:
        node = trie
        for c in lit.lower():
            if stop.fullmatch(c) or c.isdigit():
                raise ValueError(f"{lit!r}: {c!r} ends the value or is a digit")
            node = node.setdefault(c, {})
        node[""] = {}  # the literal ends here: the validator refuses what follows
    branches: list[str] = []

    def walk(node: dict[str, dict], prefix: str) -> None:
        if "" in node:
            return
        rest = max(0, n - len(prefix) - 1)
        leave = "[^" + "".join(_in_class(c) for c in sorted(node)) + excluded + "]"
        tail = f"[^{excluded}]{{{rest}}}" if rest else ""
        branches.append(re.escape(prefix) + leave + tail)
        for c in sorted(node):
            walk(node[c], prefix + c)

    walk(trie, "")
    return "(?:" + "|".join(branches) + ")"


def _in_class(c: str) -> str:
    """``c`` written inside a character class (letters stand for both cases under
    the caseless flag the gates run with)."""
    return "\\" + c if c in "\\]^-[" else c
