from __future__ import annotations

import ipaddress
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:
    import hyperscan
except ImportError:  # pragma: no cover - depends on the environment
    hyperscan = None

from ftmanifest.scan.text.anchors_re import first_bytes, split_first
from ftmanifest.scan.text.matcher import matcher
from ftmanifest.scan.text.pii import IPV4_PUBLIC_ANCHOR
from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import ENGINES, needs_hyperscan


def _candidates(engine: str, buf: bytes, rule: str) -> set[int]:
    m = matcher(True, True, engine)
    return {pos for pid, pos in m.candidates(buf) if m.rules[m.patterns[pid][1]].id == rule}


def test_ipv4_anchor_keeps_every_public_first_and_second_octet() -> None:
    """The anchor may only drop addresses the validator would refuse."""
    anchor = re.compile(IPV4_PUBLIC_ANCHOR)
    for a in range(256):
        for b in range(256):
            addr = ipaddress.IPv4Address(f"{a}.{b}.7.9")
            public = addr.is_global and not (addr.is_multicast or addr.is_reserved)
            if public:
                assert anchor.fullmatch(f"{a}.{b}.7.9"), addr


@pytest.mark.parametrize("engine", ENGINES)
def test_private_addresses_never_reach_python(engine: str) -> None:
    buf = (
        b'{"ip": "192.168.4.20", "gw": "10.0.0.1", "lo": 127.0.0.1, "ll": "169.254.9.9"} 172.20.1.1'
    )
    assert _candidates(engine, buf, "pii.ipv4-public") == set()
    assert _candidates(engine, buf + b" 8.8.8.8", "pii.ipv4-public")
    # a digest or base64 run never proposes a card number or an IBAN
    digest = b"3f786850e387550fdab8361234567890123456ed7e6dc881de23001bDE89370400440532013000"
    assert _candidates(engine, digest, "pii.card-number") == set()
    assert _candidates(engine, digest, "pii.iban") == set()


@pytest.mark.parametrize("engine", ENGINES)
def test_token_runs_give_one_finding_each(engine: str) -> None:
    found = scan_buffer(b"from 151.101.1.69:443 and 8.8.8.8.", path="x", engine=engine)
    assert [(f.rule, f.column) for f in found] == [("pii.ipv4-public", 6), ("pii.ipv4-public", 27)]
    assert found[1].excerpt != found[0].excerpt


@needs_hyperscan
def test_engines_agree_on_dense_random_addresses_and_numbers() -> None:
    r = random.Random(11)
    lines = []
    for _ in range(400):
        o = [
            r.choice((0, 1, 8, 10, 100, 127, 169, 172, 192, 203, 224, 255, r.randrange(256)))
            for _ in range(4)
        ]
        lead = r.choice(["", "0", "v", "x", ".", "-", " ", "1."])
        card = "".join(str(r.randrange(10)) for _ in range(r.choice((13, 15, 16, 19))))
        sep = r.choice(["", "a", "-"])
        lines.append(f"{lead}{o[0]}.{o[1]}.{o[2]}.{o[3]} {sep}{card} 4111 1111 1111 1111")
    buf = "\n".join(lines).encode()
    a = scan_buffer(buf, path="x", engine="re")
    b = scan_buffer(buf, path="x", engine="hyperscan")
    assert a and [f.to_dict() for f in a] == [f.to_dict() for f in b]


@pytest.mark.parametrize(
    ("pattern", "split"),
    [
        (rb"\+[1-9]", (rb"\+", rb"[1-9]")),
        (rb"[A-Z]{2}[0-9]{2}", (rb"[A-Z]", rb"[A-Z]{1}[0-9]{2}")),
        (rb"[0-9A-F]{1,4}:", (rb"[0-9A-F]", rb"[0-9A-F]{0,3}:")),
        (rb"[0-9]{2,}x", (rb"[0-9]", rb"[0-9]{1,}x")),
        (rb"[0-9]+x", None),
        (rb"[0-9]{0,2}x", None),
        (rb"[a-z]x|y", None),
        (rb"(?:ab)", None),
    ],
)
def test_re_anchor_first_token_split(pattern: bytes, split) -> None:
    assert split_first(pattern) == split
    if split:  # the rewrite matches exactly where the original does
        a, b = re.compile(pattern), re.compile(split[0] + b"(?=" + split[1] + b")")
        text = b"+1 AB12 0F3A: 12x 1x +0 ab"
        assert [m.start() for m in b.finditer(text)] == [
            i for i in range(len(text)) if a.match(text, i)
        ]


def test_first_bytes() -> None:
    assert first_bytes(IPV4_PUBLIC_ANCHOR.encode()) == frozenset(b"123456789")
    assert first_bytes(rb"(?:ab|[x-z]c)") == frozenset(b"axyz")
    assert first_bytes(rb"[^a]") is None and first_bytes(rb"\dx") is None


# Items of every rule's shape, for the engine differential below.  Hyperscan 5.4.12
# misses some matches of a short literal pair around a `*` that repeats zero times
# (`a[0-9]*b` on "-" * 15 + "ab"); a candidate Hyperscan missed would be a finding
# only the re engine reports, so the two must agree on random text of any length.
PLANTED = [
    "5425 2334 3010 9903", "4111-1111-1111-1111", "3471 842097 51001", "visa 4929420573593480",
    "(505) 658-5596", "020 7946 0958", "030/1234567", "06 12 34 56 78", "+44 20 7946 0958",
    "de89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "DNI 12345678Z", "BSN 111222333",
    "passport no. C01X00T47", "NINO: AB 12 34 56 C", "8.8.8.8", "2606:4700::1111",
    "536-22-1947", "ana.silva@uni-lisboa.pt", "ghp_SulEETldq8b8Vw2zbJYAxyL1aCcTlN99mhWp",
    "db_password = \"oPeKKO1O4IUAAoBE\"", "postgres://a:oPeKKO1O4IUAAoBE@db.corp.io/x",
    "AKIAQWB5PDKHX6PYGPAN", "ab", "a1b", "2026-11-30", "v1.2.3",
]  # fmt: skip
FILLER = st.text(alphabet="-ab01 9.:+()/\n_Zx", max_size=40)


@needs_hyperscan
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(FILLER, st.sampled_from(PLANTED)), max_size=6), FILLER)
def test_engines_agree_on_random_text_with_planted_items(parts, tail) -> None:
    buf = ("".join(f + p for f, p in parts) + tail).encode()
    a = scan_buffer(buf, path="x", engine="re")
    b = scan_buffer(buf, path="x", engine="hyperscan")
    assert [f.to_dict() for f in a] == [f.to_dict() for f in b]


@needs_hyperscan
@pytest.mark.parametrize("item", PLANTED)
def test_engines_agree_when_an_item_ends_the_buffer(item: str) -> None:
    """The Hyperscan bug's shape: a match ending exactly at the end of a long buffer."""
    for pad in range(0, 40):
        for fill in ("-", " ", "x"):
            buf = (fill * pad + " " + item).encode()
            a = scan_buffer(buf, path="x", engine="re")
            b = scan_buffer(buf, path="x", engine="hyperscan")
            assert [f.to_dict() for f in a] == [f.to_dict() for f in b], (pad, fill)


def _hs_expressions() -> list[tuple[str, bytes, bool]]:
    if hyperscan is None:
        return []
    m = matcher(True, True, "hyperscan")
    out = []
    for pid, (kind, i, pat, _) in enumerate(m._anchor_patterns()):
        if kind != "kw":
            caseless = bool(m._hs_flags(pid) & hyperscan.HS_FLAG_CASELESS)
            out.append((f"{kind}:{m.rules[i].id}:{pid}", pat, caseless))
    return out


@needs_hyperscan
@pytest.mark.parametrize(("name", "pattern", "caseless"), _hs_expressions())
def test_hyperscan_reports_every_match_end_of_each_anchor_and_gate(name, pattern, caseless) -> None:
    """Each expression Hyperscan runs, on its own matches padded to any length (the
    zero-repeat bug shows at 15+ bytes before the match), ends where ``re`` says."""
    flags = hyperscan.HS_FLAG_CASELESS if caseless else 0
    db = hyperscan.Database()
    db.compile(expressions=[pattern], ids=[0], flags=[flags])
    py = re.compile(b"(?:" + pattern + rb")\Z", re.I if caseless else 0)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(0, 40), st.sampled_from([b"-", b" ", b"x", b"0"]),
           st.from_regex(pattern, fullmatch=True), st.sampled_from([b"", b"-", b" "]))  # fmt: skip
    def check(pad: int, fill: bytes, hit: bytes, after: bytes) -> None:
        buf = fill * pad + hit + after
        got: set[int] = set()
        db.scan(buf, match_event_handler=lambda _i, _f, to, _fl, _c: got.add(to))
        want = {e for e in range(len(buf) + 1) if py.search(buf, 0, e)}
        assert want == got, (name, buf)

    check()
