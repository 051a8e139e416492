"""Personal-data rules and their validators: Luhn, IBAN mod-97, SSN, public IPs.

Layer: judging rooms - pure core (scan rules).  Patterns only propose candidates; the
validators keep false positives low (checksums, issuer ranges, reserved
number ranges, private/documentation address ranges, version-like strings).
A card number in a printed grouping (4-4-4-4, 4-6-5, 4-6-4, 4-4-4-4-3) is a
finding on its own, a bare digit run needs a card word just before it, and a
published test number is a warning of its own rule.  Phone rules
live in ``phones``, keyword-anchored document numbers in ``ids``.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ftmanifest.scan.text.ids import ID_RULES, ssn_valid
from ftmanifest.scan.text.payments import (
    CARD_RULES,
    IBAN_RULE,
    iban_valid,
    is_test_card,
    luhn,
    plausible_card_iin,
)
from ftmanifest.scan.text.phones import PHONE_RULES
from ftmanifest.scan.text.secret_rules import Rule
from ftmanifest.scan.text.secrets import token_boundary

__all__ = ["PII_RULES", "iban_valid", "is_test_card", "luhn", "plausible_card_iin"]

Match = Any

_ALNUM = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def ssn(m: Match, g: int) -> bool:
    """US SSN: area not 000/666/9xx, group not 00, serial not 0000."""
    buf, end = m.string, m.end(g)
    if not token_boundary(buf, m.start(g), end, b"-_/") or buf[m.start(g) - 1 : m.start(g)] == b".":
        return False
    if buf[end : end + 1] == b"." and buf[end + 1 : end + 2].isalnum():
        return False  # 536-22-1947.2: not a sentence's full stop
    return ssn_valid(m.group(g).decode())


def _public(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return addr.is_global and not (addr.is_multicast or addr.is_reserved or addr.is_unspecified)


_VERSION_CONTEXT = (b"version", b"ver ", b"v.", b"release", b"==", b">=", b"<=", b"~=", b"@")


# The IPv4 candidate anchor: a dotted quad at the start of a run of digits and
# dots (through ``anchor_left``), without leading zeros in its first two octets
# (``ipaddress`` refuses them) and without the private, loopback, link-local
# and multicast ranges the validator drops first.
# Logs and datasets carry such addresses on every line: excluding them here
# keeps them out of Python entirely.  A test checks the anchor against the
# validator for every first and second octet.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_FIRST_TWO = (
    r"(?:(?:[1-9]|1[1-9]|[2-9][0-9]|1[01][0-9]|12[0-689]|1[3-58][0-9]|16[0-8]|17[013-9]"
    r"|19[013-9]|2[01][0-9]|22[0-3])\."
    + _OCTET
    + r"|169\.(?:25[0-35]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
    r"|172\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[4-9][0-9]|3[2-9]|1[0-5]|[0-9])"
    r"|192\.(?:25[0-5]|2[0-4][0-9]|1[0-57-9][0-9]|16[0-79]|[1-9]?[0-9]))"
)
# The last two octets are left loose: one candidate per address is enough.  Hyperscan
# runs it in a database of its own (``Rule.anchor_apart``): in the shared one it slowed
# every pattern.
IPV4_PUBLIC_ANCHOR = _FIRST_TWO + r"\.[0-9]{1,3}\.[0-9]"


def ipv4(m: Match, g: int) -> bool:
    buf, start, end = m.string, m.start(g), m.end(g)
    octets = [int(x) for x in m.group(g).split(b".")]
    a, b = octets[0], octets[1]
    if max(octets) > 255 or a in (0, 10, 127) or a >= 224 or (a, b) == (192, 168):
        return False  # fast path for the private ranges that fill logs
    if (a == 172 and 16 <= b <= 31) or (a, b) == (169, 254):
        return False
    if not token_boundary(buf, start, end, b"_-"):
        return False
    before = buf[max(0, start - 12) : start].lower()
    if any(w in before for w in _VERSION_CONTEXT):
        return False
    try:
        return _public(ipaddress.IPv4Address(m.group(g).decode()))
    except ValueError:
        return False


def ipv6(m: Match, g: int) -> bool:
    text = m.group(g).decode()
    if sum(1 for part in text.split(":") if part) < 4:
        return False
    if not token_boundary(m.string, m.start(g), m.end(g), b"_-"):
        return False
    try:
        return _public(ipaddress.IPv6Address(text))
    except ValueError:
        return False


_QUIET_DOMAINS = (b"example.com", b"example.org", b"example.net", b"localhost", b"users.noreply")
_FILE_TLDS = frozenset(
    b"png jpg jpeg gif svg webp ico js css txt json yaml yml toml bin pth".split()
)


# A UTF-8 encoded character that may be part of an address: not U+0080-00BF (no-break
# space, guillemets), not U+2000-2FFF (punctuation, symbols), not U+3000-303F (CJK
# punctuation), not the full-width and half-width forms U+FEC0-FF7F, not the emoji and
# symbol plane U+1F000-1FFFF (an emoji glued to an address is prose, not its first letter).
_U8 = (
    r"(?:[\xc3-\xdf][\x80-\xbf]|\xe3[\x81-\xbf][\x80-\xbf]|[\xe0\xe1\xe4-\xee][\x80-\xbf]{2}"
    r"|\xef[\x80-\xba\xbe\xbf][\x80-\xbf]|\xf0[\x90-\x9e][\x80-\xbf]{2}|[\xf1-\xf4][\x80-\xbf]{3})"
)
_LABEL = r"(?:[A-Za-z0-9\-]|" + _U8 + "){1,63}"
_EMAIL = (
    r"(?:[A-Za-z0-9._%+\-]|" + _U8 + "){1,64}@" + _LABEL + r"(?:\." + _LABEL + "){0,8}"
    r"\.(?:xn--[A-Za-z0-9\-]{1,59}|[A-Za-z]{2,24}|" + _U8 + "{2,24})"
)


# The bytes before an address's @ as its Hyperscan gates read them: the last one a
# local-part byte, and not a local part "git" (``git@github.com``), which ``email``
# refuses; "git" after more local-part bytes (``digit@``) still counts.  Two gates:
# one alternation of both ran Hyperscan at a quarter of its speed.
_DOMAIN_GATE = r"@[A-Za-z0-9\-\x80-\xff]{1,189}\."
_EMAIL_GATES = (
    r"[A-SU-Za-su-z0-9._%+\-\x80-\xbf]" + _DOMAIN_GATE,
    r"(?:^|[^iI]|(?:^|[^gG])[iI]|[A-Za-z0-9._%+\-\x80-\xff][gG][iI])[tT]" + _DOMAIN_GATE,
)


def email(m: Match, g: int) -> bool:
    buf, start, end = m.string, m.start(g), m.end(g)
    if start > 0 and buf[start - 1] in _ALNUM | frozenset(b"._%+-"):
        return False
    if end < len(buf) and buf[end] in _ALNUM:
        return False
    local, _, domain = m.group(g).lower().rpartition(b"@")
    if domain.rsplit(b".", 1)[-1] in _FILE_TLDS or local in (b"git", b"noreply"):
        return False
    tld = domain.rsplit(b".", 1)[-1]
    return not (
        tld in (b"test", b"invalid", b"example", b"local") or domain.endswith(_QUIET_DOMAINS)
    )


PII_RULES: tuple[Rule, ...] = (
    Rule(
        "pii.email",
        "pii",
        "email address (RFC 5322, and RFC 6531 with Unicode local parts and domains)",
        r"[\x80-\xff]*?(" + _EMAIL + ")",
        ("@",),
        validator=email,
        group=1,
        back_chars=r"A-Za-z0-9._%+\-\x80-\xff",
        gate=_EMAIL_GATES,
        gate_len=192,
        severity="warning",
        back=190,
        fwd=400,
        true_positives=(
            "contact jane.doe+ml@acme-corp.io today",
            "écrire à josé@bücher.de",
            "почта: иван.петров@пример.рф",
            "「用户@例子.中国」",
        ),
        false_positives=("user@example.com", "logo@2x.png", "git@github.com:org/repo", "a@b"),
    ),
    *PHONE_RULES,
    IBAN_RULE,
    *CARD_RULES,
    Rule(
        "pii.us-ssn",
        "pii",
        "US social security number",
        r"[0-9]{3}-[0-9]{2}-[0-9]{4}",
        anchors=((r"[0-9]{3}-[0-9]{2}-[0-9]{4}", 11),),
        anchor_left=r"0-9A-Za-z_./\-",
        validator=ssn,
        severity="warning",
        fwd=11,
        true_positives=("SSN: 536-22-1947",),
        false_positives=(
            "000-12-3456",
            "666-12-3456",
            "912-12-3456",
            "536-00-1947",
            "123-45-6789",
            "2024-01-15-1234",
        ),
    ),
    Rule(
        "pii.ipv4-public",
        "pii",
        "public IPv4 address",
        r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}",
        anchors=((IPV4_PUBLIC_ANCHOR, 0),),
        anchor_apart=True,
        anchor_left="0-9.",
        token_chars="0-9.",
        validator=ipv4,
        severity="warning",
        true_positives=("client 8.8.8.8 connected", "from 151.101.1.69:443"),
        false_positives=(
            "10.0.0.1",
            "192.168.1.20",
            "127.0.0.1",
            "169.254.1.1",
            "192.0.2.44",
            "203.0.113.9",
            "version 1.2.3.4",
            "torch==2.1.0.1",
            "1.2.3.4.5",
        ),
    ),
    Rule(
        "pii.ipv6-public",
        "pii",
        "public IPv6 address",
        r"[0-9A-Fa-f:]{2,39}",
        anchors=((r"[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}", 0),),
        token_chars="0-9A-Fa-f:",
        validator=ipv6,
        severity="warning",
        true_positives=("addr 2606:4700:4700::1111 ok", "2a00:1450:4001:830::200e"),
        false_positives=(
            "::1",
            "fe80::1:2:3:4",
            "2001:db8:85a3::8a2e:370:7334",
            "std::vector",
            "12:30:45",
            "00:1a:2b:3c:4d:5e",
        ),
    ),
    *ID_RULES,
)
