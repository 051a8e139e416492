from __future__ import annotations

import ipaddress
import random
import re

import pytest

from ftmanifest.scan.anchors_re import first_bytes, split_first
from ftmanifest.scan.matcher import matcher
from ftmanifest.scan.pii import IPV4_PUBLIC_ANCHOR
from ftmanifest.scan.text import scan_buffer

ENGINES = ["re", "hyperscan"]


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
