"""Payment-card and IBAN rules and their validators: issuer ranges, Luhn, mod-97.

Layer: judging rooms - pure core (scan rules).  Patterns only propose candidates; the
validators keep false positives low.  A card number is Luhn-valid and inside an
issuer range of the major brands (ISO/IEC 7812 IINs with each brand's lengths,
Maestro and Mir included); printed in groups of four (the last group shorter),
4-6-5 or 4-6-4 it is a finding on its own, a bare digit run (or a 12-digit
Maestro number) needs a card word just before it, and a published test number
is a warning of its own rule.  An IBAN is any country of the SWIFT IBAN
registry at its exact length, mod-97 checked, upper or lower case, compact or
grouped with single spaces or dashes.
"""

from __future__ import annotations

import re
from typing import Any

from ftmanifest.scan.text.secret_rules import Rule

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


# (first prefix, last prefix, lengths): Visa, Mastercard, Amex, Discover, JCB, Diners,
# UnionPay, Mir, Maestro.  Maestro's 50 and 56-69 overlap Discover and UnionPay; a
# number is plausible when any brand takes it.
CARD_IINS: tuple[tuple[int, int, range], ...] = (
    (4, 4, range(13, 20, 3)),
    (51, 55, range(16, 17)), (2221, 2720, range(16, 17)),
    (34, 34, range(15, 16)), (37, 37, range(15, 16)),
    (6011, 6011, range(16, 20)), (644, 649, range(16, 20)), (65, 65, range(16, 20)),
    (3528, 3589, range(16, 20)),
    (300, 305, range(14, 20)), (36, 36, range(14, 20)), (38, 39, range(14, 20)),
    (62, 62, range(16, 20)),
    (2200, 2204, range(16, 20)),
    (50, 50, range(12, 20)), (56, 69, range(12, 20)),
)  # fmt: skip


def plausible_card_iin(digits: str) -> bool:
    """Issuer prefix and length of the major schemes."""
    n = len(digits)
    return any(
        lo <= int(digits[: len(str(lo))]) <= hi and n in lengths for lo, hi, lengths in CARD_IINS
    )


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
_CARD_CONTEXT = re.compile(
    rb"card|visa|master|amex|american express|discover|diners|jcb|unionpay|maestro|\bmir\b"
    rb"|credit|debit|\bcc|\bpan\b|karte|carte|tarjeta|carta|cart\xc3\xa3o|\xd0\xba\xd0\xb0\xd1\x80\xd1\x82"
)
# another group after or before it (not an expiry date): a row of a table of numbers
_MORE_DIGITS = re.compile(rb"[ \-](?:[0-9](?![0-9]?/)|[0-9A-F]{4}(?![0-9A-Za-z]))")
_GROUP_BEFORE = re.compile(rb"(?:[0-9]|(?<![0-9A-Za-z])[0-9A-F]{4})[ \-]\Z")
_CARD_LEFT = _ALNUM | frozenset(b"-_.,+/:")


def _printed(groups: tuple[int, ...]) -> bool:
    """Groups of four with a shorter last one (13-19 digits), or Amex 4-6-5, Diners 4-6-4."""
    if groups in ((4, 6, 5), (4, 6, 4)):
        return True
    return len(groups) >= 4 and set(groups[:-1]) == {4} and 1 <= groups[-1] <= 4


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
    if not (12 <= len(digits) <= 19 and plausible_card_iin(digits) and luhn(digits)):
        return None
    if not (_printed(groups) and len(digits) > 12) and not _CARD_CONTEXT.search(
        buf[max(0, start - 40) : start].lower()
    ):
        return None
    return digits


def card(m: Match, g: int) -> bool:
    digits = _card(m, g)
    return digits is not None and not is_test_card(digits)


def card_test(m: Match, g: int) -> bool:
    digits = _card(m, g)
    return digits is not None and is_test_card(digits)


# The SWIFT IBAN registry: country code and IBAN length.
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28,
    "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
    "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
    "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
    "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip


def _iban_regex() -> str:
    """Per length, its countries, the check digits and exactly that many characters
    after them, each optionally after one space or dash: the match ends where the
    IBAN does, whatever its grouping."""
    by_len: dict[int, list[str]] = {}
    for cc, n in IBAN_LENGTHS.items():
        by_len.setdefault(n, []).append(cc)
    alts = [
        f"(?:{'|'.join(ccs)})[0-9]{{2}}(?:[ \\-]?[A-Z0-9]){{{n - 4}}}"
        for n, ccs in sorted(by_len.items())
    ]
    return "(?:" + "|".join(alts) + ")(?![A-Za-z0-9])"


def iban_valid(compact: str) -> bool:
    """ISO 13616: country length and mod-97 == 1."""
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def iban(m: Match, g: int) -> bool:
    """Upper or lower case (not mixed), one kind of separator, a token of its own."""
    buf, start, raw = m.string, m.start(g), m.group(g).decode()
    if start > 0 and buf[start - 1] in _ALNUM | frozenset(b"_-/"):
        return False
    if " " in raw and "-" in raw:
        return False
    value = raw.replace(" ", "").replace("-", "")
    return value in (value.upper(), value.lower()) and iban_valid(value.upper())


IBAN_RULE = Rule(
    "pii.iban",
    "pii",
    "IBAN (mod-97 checked)",
    _iban_regex(),
    # Lower case compact is the start of many hex digests: the validator's exact
    # length, token end and mod-97 refuse them.
    anchors=(
        (r"[A-Z]{2}[0-9]{2}", 4),
        (r"[a-z]{2}[0-9]{2}[ \-][0-9a-z]{4}", 9),
        (r"[a-z]{2}[0-9]{2}[0-9a-z]{11}", 15),
    ),
    anchor_left="0-9A-Za-z_/\\-",
    validator=iban,
    ignore_case=True,
    severity="warning",
    fwd=48,
    true_positives=(
        "IBAN DE89 3704 0044 0532 0130 00",
        "GB82WEST12345698765432",
        "iban: de89 3704 0044 0532 0130 00.",
        "ru0204452560040702810412345678901",
    ),  # fmt: skip
    false_positives=(
        "DE89 3704 0044 0532 0130 01",
        "AB12 CDEF GHIJ KLMN",
        "de89370400440532013000f3a9c1",
    ),  # fmt: skip
)

CARD_RULES: tuple[Rule, ...] = tuple(
    Rule(
        rid,
        "pii",
        what,
        r"[0-9]{4}([ \-])[0-9]{4}\1[0-9]{4}(?:\1[0-9]{1,4}(?:\1[0-9]{1,3}(?![0-9]))?)?"
        r"|[0-9]{4}([ \-])[0-9]{6}\2[0-9]{4,5}|[0-9]{12,19}",
        anchors=(
            (r"[0-9]{12}", 12),
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
            "5018 2345 6782",
        ),  # fmt: skip
    )
    for rid, what, fn, severity, tps in (
        (
            "pii.card-number",
            "payment card number (Luhn and issuer checked)",
            card,
            "error",
            (
                "Paid with 5425 2334 3010 9903.",
                "visa 4929420573593480",
                "3471-842097-51001",
                "Maestro 6759 4111 0000 0018 8",
                "mir 2200 1234 5678 9019",
            ),
        ),
        (
            "pii.card-test-number",
            "published test card number (a PSP's sandbox)",
            card_test,
            "warning",
            ("card 4111 1111 1111 1111 exp", "4242 4242 4242 4242", "cc 4012888888881881"),
        ),
    )  # fmt: skip
)
