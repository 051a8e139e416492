"""Anchors apart: Hyperscan runs the public IPv4 anchor in a database of its own.

Its alternations of digit classes behind a left condition slowed the shared database
by half; alone they cost little.  The candidates must be exactly the anchor's own: the
``re`` engine runs the anchor itself, so the two engines' candidate positions are
compared on dense digits and dots (addresses of every range, glued, cut, with leading
zeros).
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftmanifest.scan.text.matcher import matcher
from ftmanifest.scan.text.pii import PII_RULES
from tests.scan.engines import needs_hyperscan

APART = [r for r in PII_RULES if r.anchor_apart]


def _candidates(engine: str, buf: bytes) -> set[tuple[str, int]]:
    m = matcher(True, True, engine)
    return {
        (m.rules[m.patterns[pid][1]].id, pos)
        for pid, pos in m.candidates(buf)
        if m.rules[m.patterns[pid][1]].anchor_apart
    }


def test_the_public_ipv4_rule_runs_apart() -> None:
    assert [r.id for r in APART] == ["pii.ipv4-public"]


@needs_hyperscan
def test_an_anchor_apart_is_not_in_the_shared_database() -> None:
    m = matcher(True, True, "hyperscan")
    assert m._db_apart is not None
    found: list[int] = []
    m._db.scan(b"client 8.8.8.8 connected", match_event_handler=lambda i, *_: found.append(i))
    assert not [i for i in found if m.rules[m.patterns[i][1]].anchor_apart]
    assert _candidates("hyperscan", b"client 8.8.8.8 connected") == {("pii.ipv4-public", 14)}


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
