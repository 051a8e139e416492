"""The record every scan rule is: a literal keyword, a window regex, a validator.

Layer: judging rooms - pure core (scan rules).  Secret and PII rules alike are
``Rule`` records; ``matcher`` compiles them.  Kept apart from the rule tables so
that each table module stays small.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Validator = Callable[[Any, int], bool]  # (re.Match[bytes], group) -> keep?


@dataclass(frozen=True)
class Rule:
    """One detector.  ``regex`` is a bytes pattern without nested quantifiers."""

    id: str
    kind: str  # "secret" or "pii"
    description: str
    regex: str
    keywords: tuple[str, ...] = ()  # lowercase literals that must occur in a match
    # Regex anchors for keyword-less PII rules: (pattern, length).  A length > 0
    # means the pattern has that fixed length and the rule regex is matched at the
    # anchor's start; length 0 means "token" mode: the hit is widened to the run of
    # ``token_chars`` around it and the rule regex must match that run exactly.
    anchors: tuple[tuple[str, int], ...] = ()
    token_chars: str = ""
    # A regex class body: an anchor counts only where it is not preceded by these
    # characters (the validator would refuse the match anyway).  It only prunes
    # candidates, so that digests and base64 runs never reach Python.
    anchor_left: str = ""
    severity: str = "error"
    validator: Validator | None = None
    group: int = 0  # the group holding the sensitive value
    back: int = 0  # how far a match may start before its keyword
    back_chars: str = ""  # ... over these characters (a regex class body)
    # Hyperscan-only speed-up: a necessary condition of a finding (``regex`` and
    # ``validator``, same flags) whose matches end within ``gate_len`` bytes after the
    # keyword; keyword hits with no gate match nearby are dropped unconfirmed.  It
    # never changes the findings.  Several gates: a finding needs one of them.
    gate: str | tuple[str, ...] | None = None
    gate_len: int = 0
    # Hyperscan-only: the rule's anchors run in a database of their own.  Alternations
    # of digit classes behind a left condition slowed the shared one by half; alone
    # they cost little.  The candidates are the same.
    anchor_apart: bool = False
    fwd: int = 256  # window after a keyword hit
    ignore_case: bool = False
    true_positives: tuple[str, ...] = ()
    false_positives: tuple[str, ...] = ()
