"""Gated anchors: Hyperscan runs a cheap gate, ``re`` tests the anchor at its ends.

The candidates must be exactly the anchor's own: the ``re`` engine runs the anchor
itself, so the two engines' candidate positions for a gated rule are compared on
dense digits and dots (addresses of every range, glued, cut, with leading zeros),
and each gate is checked to end wherever its anchor ends.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.scan.text.matcher import matcher
from ftmanifest.scan.text.pii import PII_RULES
from tests.scan.engines import needs_hyperscan

GATED = [r for r in PII_RULES if r.anchor_gate]


def _candidates(engine: str, buf: bytes) -> set[tuple[str, int]]:
    m = matcher(True, True, engine)
    return {
        (m.rules[m.patterns[pid][1]].id, pos)
        for pid, pos in m.candidates(buf)
        if m.rules[m.patterns[pid][1]].anchor_gate
    }


def test_the_public_ipv4_rule_is_gated() -> None:
    assert [r.id for r in GATED] == ["pii.ipv4-public"]


@pytest.mark.parametrize("rule", GATED, ids=lambda r: r.id)
def test_every_anchor_match_ends_where_a_gate_match_ends(rule) -> None:
    gate = re.compile(rule.anchor_gate.encode())
    r = random.Random(5)
    for anchor, _ in rule.anchors:
        rx = re.compile(anchor.encode())
        for _ in range(3000):
            text = ".".join(
                str(r.choice((r.randrange(256), r.randrange(10), 168, 192))) for _ in range(4)
            )
            for m in rx.finditer(text.encode()):
                assert any(gate.fullmatch(text.encode(), s, m.end()) for s in range(m.end())), text


OCTETS = st.sampled_from(
    "0 1 8 10 16 31 100 127 168 169 172 192 203 223 224 254 255 256 999 01 1111".split()
)
SEPARATORS = st.sampled_from([".", ".", ".", " ", "..", "-", "a", ":", "\n", "v", ""])


@needs_hyperscan
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(OCTETS, SEPARATORS), max_size=14))
def test_engines_propose_the_same_candidates_on_dense_addresses(parts) -> None:
    buf = "".join(o + s for o, s in parts).encode()
    assert _candidates("hyperscan", buf) == _candidates("re", buf), buf


@needs_hyperscan
def test_engines_propose_the_same_candidates_on_random_addresses() -> None:
    r = random.Random(7)
    pieces = []
    for _ in range(3000):
        octets = [
            str(r.choice((r.randrange(256), 10, 127, 169, 172, 192, 168, 254)))
            for _ in range(r.choice((3, 4, 4, 5)))
        ]
        pieces.append(".".join(octets) + r.choice((" ", ":443 ", ".", "", "\n", "x")))
    buf = "".join(pieces).encode()
    got = _candidates("hyperscan", buf)
    assert got == _candidates("re", buf)
    assert len(got) > 100  # public addresses were proposed, private ones were not
