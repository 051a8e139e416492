"""Personal-data rules and their validators: Luhn, IBAN mod-97, SSN, public IPs.

Layer: pure core (scan rules).  Patterns only propose candidates; the
validators keep false positives low (checksums, issuer ranges, reserved
number ranges, private/documentation address ranges, version-like strings).
A card number in a printed grouping (4-4-4-4, 4-6-5, 4-6-4, 4-4-4-4-3) is a
finding on its own, a bare digit run needs a card word just before it, and a
published test number is a warning of its own rule (issue 9).  Phone rules
live in ``phones``, keyword-anchored document numbers in ``ids``.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from ftmanifest.scan.text.ids import ID_RULES
from ftmanifest.scan.text.phones import PHONE_RULES
from ftmanifest.scan.text.secret_rules import Rule
from ftmanifest.scan.text.secrets import token_boundary

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


# Published PSP test numbers (Stripe, Adyen, Braintree, PayPal, Worldpay docs), beyond
# the shapes ``is_test_card`` recognises by themselves (repeats, runs of one digit).
TEST_CARDS = frozenset(
    """
4000056655665556 4005519200000004 4009348888881881 4012000033330026 4012000077777777
4012888888881881 4217651111111119 4222222222222 4500600000000061 4988438843884305
4917610000000000 4484070000000000 4917300800000000 4462030000000000 4035501000000008
4000002500003155 4000002760003184 2223003122003222 5200828282828210 5105105105105100
5555341244441115 2222400070000005 2223000048400011 5100290029002909 5577000055770004
5136333333333335 378282246310005 371449635398431 378734493671000 374245455400126
376449047333005 6011000990139424 6011981111111113 6011601160116611 3056930009020004
36227206271667 30569309025904 38520000023237 36006666333344 36700102000000
36148900647913 3566002020360505 3530111333300000 3569990010095841 6200000000000005
6200000000000047 6205500000000000004 6243030000000001 6250941006528599 6759649826438453
""".split()
)
_PRINTED = frozenset({(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 6, 5), (4, 6, 4)})
_CARD_CONTEXT = re.compile(
    rb"card|visa|master|amex|american express|discover|diners|jcb|unionpay|credit|debit"
    rb"|\bcc|\bpan\b|karte|carte|tarjeta|carta|cart\xc3\xa3o"
)
# another group after or before it (not an expiry date): a row of a table of numbers
_MORE_DIGITS = re.compile(rb"[ \-](?:[0-9](?![0-9]?/)|[0-9A-F]{4}(?![0-9A-Za-z]))")
_GROUP_BEFORE = re.compile(rb"(?:[0-9]|(?<![0-9A-Za-z])[0-9A-F]{4})[ \-]\Z")
_CARD_LEFT = _ALNUM | frozenset(b"-_.,+/:")


def is_test_card(digits: str) -> bool:
    """A published test number, or a shape no issuer prints: a repeat of 1-4 digits, or
    all but four digits the same (``4000 0000 0000 0002``, ``5555 5555 5555 4444``)."""
    body, n = digits[:-1], len(digits)
    if digits in TEST_CARDS or max(digits.count(d) for d in set(digits)) >= n - 4:
        return True
    return any(body == (body[:p] * n)[: len(body)] for p in (2, 3, 4))


def _card(m: Match, g: int) -> str | None:
    """The digits of a plausible card number: printed grouping or a card word before it."""
    buf, start, end, raw = m.string, m.start(g), m.end(g), m.group(g)
    if (
        start > 0
        and buf[start - 1] in _CARD_LEFT
        or _GROUP_BEFORE.search(buf[max(0, start - 6) : start])
    ):
        return None
    if end < len(buf) and (
        buf[end] in _ALNUM | frozenset(b"_-+/:")
        or (buf[end] in b".," and buf[end + 1 : end + 2].isdigit())
        or _MORE_DIGITS.match(buf, end)
    ):
        return None
    digits = "".join(chr(c) for c in raw if 48 <= c <= 57)
    groups = tuple(len(x) for x in re.split(rb"[ \-]", raw))
    if not (13 <= len(digits) <= 19 and plausible_card_iin(digits) and luhn(digits)):
        return None
    if groups not in _PRINTED and not _CARD_CONTEXT.search(buf[max(0, start - 40) : start].lower()):
        return None
    return digits


def card(m: Match, g: int) -> bool:
    digits = _card(m, g)
    return digits is not None and not is_test_card(digits)


def card_test(m: Match, g: int) -> bool:
    digits = _card(m, g)
    return digits is not None and is_test_card(digits)


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
    """Upper or lower case (not mixed), compact or in groups of four, ending a token."""
    buf, start, raw = m.string, m.start(g), m.group(g).decode()
    if start > 0 and buf[start - 1] in _ALNUM | frozenset(b"_-/"):
        return False
    n = IBAN_LENGTHS.get(raw[:2].upper(), 0)
    chars = [i for i, c in enumerate(raw) if c != " "][:n]
    if n == 0 or len(chars) < n:
        return False
    value = "".join(raw[i] for i in chars)
    if value not in (value.upper(), value.lower()) or not iban_valid(value.upper()):
        return False
    end = start + chars[-1] + 1
    return end >= len(buf) or buf[end] not in _ALNUM


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
    *PHONE_RULES,
    Rule(
        "pii.iban",
        "pii",
        "IBAN (mod-97 checked)",
        r"[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?",
        # lower case only in groups of four: compact, it would be any hex digest's start
        anchors=((r"[A-Z]{2}[0-9]{2}", 4), (r"[a-z]{2}[0-9]{2} [0-9a-z]{4}", 9)),
        anchor_left="0-9A-Za-z_/\\-",
        validator=iban,
        ignore_case=True,
        severity="warning",
        fwd=48,
        true_positives=(
            "IBAN DE89 3704 0044 0532 0130 00",
            "GB82WEST12345698765432",
            "iban: de89 3704 0044 0532 0130 00.",
        ),  # fmt: skip
        false_positives=(
            "DE89 3704 0044 0532 0130 01",
            "AB12 CDEF GHIJ KLMN",
            "de89370400440532013000f3a9c1",
        ),  # fmt: skip
    ),
    *(
        Rule(
            rid,
            "pii",
            what,
            r"[0-9]{4}([ \-])[0-9]{4}\1[0-9]{4}\1[0-9]{1,4}(?:\1[0-9]{3}(?![0-9]))?"
            r"|[0-9]{4}([ \-])[0-9]{6}\2[0-9]{4,5}|[0-9]{13,19}",
            anchors=(
                (r"[0-9]{13}", 13),
                (r"[0-9]{4}[ \-][0-9]{4}[ \-][0-9]{4}", 14),
                (r"[0-9]{4}[ \-][0-9]{6}[ \-][0-9]{4}", 16),
            ),
            anchor_left=r"0-9A-Za-z_.,+/:\-",
            validator=fn,
            severity=severity,
            fwd=30,
            true_positives=tps,
            false_positives=(
                "4111 1111 1111 1112",
                "1699999999123",
                "order 1234567890123456",
                "id 4929420573593480",
                "4929 4205 7359 3480 2",
            ),  # fmt: skip
        )
        for rid, what, fn, severity, tps in (
            (
                "pii.card-number",
                "payment card number (Luhn and issuer checked)",
                card,
                "error",
                ("Paid with 5425 2334 3010 9903.", "visa 4929420573593480", "3471-842097-51001"),
            ),
            (
                "pii.card-test-number",
                "published test card number (a PSP's sandbox)",
                card_test,
                "warning",
                ("card 4111 1111 1111 1111 exp", "4242 4242 4242 4242", "cc 4012888888881881"),
            ),
        )  # fmt: skip
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
    *ID_RULES,
)
