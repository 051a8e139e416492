"""Personal-data rules and their validators: Luhn, IBAN mod-97, SSN, public IPs.

Layer: pure core (scan rules).  Patterns only propose candidates; the
validators keep false positives low (checksums, issuer ranges, reserved
number ranges, private/documentation address ranges, version-like strings).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ftmanifest.scan.rules import Rule
from ftmanifest.scan.secrets import token_boundary

Match = Any

_ALNUM = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def plausible_card_iin(digits: str) -> bool:
    """Issuer prefix and length of the major schemes."""
    n, p2, p4 = len(digits), int(digits[:2]), int(digits[:4])
    if digits[0] == "4":
        return n in (13, 16, 19)  # Visa
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:
        return n == 16  # Mastercard
    if p2 in (34, 37):
        return n == 15  # Amex
    if digits.startswith("6011") or p2 == 65 or 644 <= int(digits[:3]) <= 649:
        return 16 <= n <= 19  # Discover
    if 3528 <= p4 <= 3589:
        return 16 <= n <= 19  # JCB
    if p2 in (36, 38, 39) or 300 <= int(digits[:3]) <= 305:
        return 14 <= n <= 19  # Diners
    if p2 == 62:
        return 16 <= n <= 19  # UnionPay
    return False


def card(m: Match, g: int) -> bool:
    raw = m.group(g).decode()
    seps = {c for c in raw if not c.isdigit()}
    digits = "".join(c for c in raw if c.isdigit())
    if len(seps) > 1 or not 13 <= len(digits) <= 19:
        return False
    if not token_boundary(m.string, m.start(g), m.end(g), b"-_.,+/:"):
        return False
    return plausible_card_iin(digits) and luhn(digits)


IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30,
    "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24,
    "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}  # fmt: skip


def iban_valid(compact: str) -> bool:
    """ISO 13616: country length and mod-97 == 1."""
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def iban(m: Match, g: int) -> bool:
    buf, start = m.string, m.start(g)
    if start > 0 and buf[start - 1] in _ALNUM:
        return False
    compact = m.group(g).decode().replace(" ", "")
    n = IBAN_LENGTHS.get(compact[:2], 0)
    if n == 0 or len(compact) < n or not iban_valid(compact[:n]):
        return False
    # the IBAN must end where the match (or a space-separated group) ends
    end = m.end(g)
    return len(compact) > n or end >= len(buf) or buf[end] not in _ALNUM


def ssn(m: Match, g: int) -> bool:
    """US SSN: area not 000/666/9xx, group not 00, serial not 0000."""
    if not token_boundary(m.string, m.start(g), m.end(g), b"-_./"):
        return False
    area, group, serial = m.group(g).decode().split("-")
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return False
    return m.group(g) not in (b"123-45-6789", b"078-05-1120", b"219-09-9999")


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
# The last two octets are left loose: one candidate per address is enough.
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


def phone(m: Match, g: int) -> bool:
    """E.164-like: ``+`` and country code, 8-15 digits; unformatted needs 11+."""
    buf, start, end = m.string, m.start(g), m.end(g)
    if start > 0 and buf[start - 1] in _ALNUM | frozenset(b"+=_"):
        return False
    if end < len(buf) and buf[end] in _ALNUM | frozenset(b"_"):
        return False
    raw = m.group(g)
    digits = sum(1 for c in raw if 48 <= c <= 57)
    formatted = any(c in b" .-()" for c in raw[1:])
    return 8 <= digits <= 15 and (formatted or digits >= 11)


PII_RULES: tuple[Rule, ...] = (
    Rule(
        "pii.email",
        "pii",
        "email address",
        r"[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){0,8}\.[A-Za-z]{2,24}",
        ("@",),
        validator=email,
        back_chars=r"A-Za-z0-9._%+\-",
        gate=r"[A-Za-z0-9._%+\-]@[A-Za-z0-9\-]{1,63}\.",
        gate_len=70,
        severity="warning",
        back=65,
        fwd=300,
        true_positives=("contact jane.doe+ml@acme-corp.io today",),
        false_positives=("user@example.com", "logo@2x.png", "git@github.com:org/repo", "a@b"),
    ),
    Rule(
        "pii.phone",
        "pii",
        "phone number in international format",
        r"\+[1-9][0-9]{0,2}(?:[ .\-]?\(?[0-9]{1,4}\)?)(?:[ .\-]?[0-9]{2,8}){1,5}",
        anchors=((r"\+[1-9]", 2),),
        anchor_left="0-9A-Za-z+=_",
        validator=phone,
        severity="warning",
        fwd=40,
        true_positives=("call +49 30 1234 5678", "tel: +1 (415) 555-0132", "+447911123456"),
        false_positives=("x+1", "offset +0100", "a+12345678", "+1.5", "2024-01-01T10:00:00+01:00"),
    ),
    Rule(
        "pii.iban",
        "pii",
        "IBAN (mod-97 checked)",
        r"[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?",
        anchors=((r"[A-Z]{2}[0-9]{2}", 4),),
        anchor_left="0-9A-Za-z",
        validator=iban,
        severity="warning",
        fwd=48,
        true_positives=("IBAN DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432"),
        false_positives=("DE89 3704 0044 0532 0130 01", "AB12 CDEF GHIJ KLMN"),
    ),
    Rule(
        "pii.card-number",
        "pii",
        "payment card number (Luhn and issuer checked)",
        r"[0-9](?:[0-9]|[ \-](?=[0-9])){11,22}[0-9]",
        anchors=(
            (r"[0-9]{13}", 13),
            (r"[0-9]{4}[ \-][0-9]{4}[ \-][0-9]{4}", 14),
            (r"[0-9]{4}[ \-][0-9]{6}[ \-][0-9]{5}", 17),
        ),
        anchor_left=r"0-9A-Za-z_.,+/:\-",
        validator=card,
        severity="warning",
        fwd=30,
        true_positives=("card 4111 1111 1111 1111 exp", "4012888888881881", "3782-822463-10005"),
        false_positives=("4111 1111 1111 1112", "1699999999123", "order 1234567890123456"),
    ),
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
)
