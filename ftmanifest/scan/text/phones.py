"""Phone-number rules: international (``+44 20 ...``) and national formats.

Layer: judging rooms - pure core (scan rules).  Cheap anchors propose digit-ish
candidates in the shapes people print (``(505) 658-5596``, ``020 7946 0958``,
``030/1234567``, ``06 12 34 56 78``); shape checks drop dates, versions, times and digit
groups that belong to a longer number; Google's libphonenumber metadata (the
``phonenumbers`` package, imported on first use) has the last word: ``parse`` +
``is_valid_number``.  A national number is tried against each region of :func:`regions`:
``DEFAULT_REGIONS``, or the ``FTMANIFEST_PHONE_REGIONS`` environment variable
(``US,GB``), or :func:`set_regions`.  An unformatted national number needs a phone
keyword just before it; international numbers are checked whatever the regions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from ftmanifest.scan.text.secret_rules import Rule

Match = Any

# NANP (US/CA and the Caribbean), the largest European locales, Australia, India, Brazil.
DEFAULT_REGIONS: tuple[str, ...] = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "AU", "IN", "BR")
_regions: tuple[str, ...] | None = None

_ALNUM = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_LEFT_BAD = _ALNUM | frozenset(b"_+=.,:/#$-\\")
_GROUP_BEFORE = re.compile(rb"(?:[0-9][ .\-/]|[0-9A-F]{4} |\+[0-9]{1,3}[ .\-]?\(?|\(0\) ?)\Z")
_GROUP_AFTER = re.compile(rb"[ .,\-/][0-9]|[0-9A-Za-z_]| [0-9A-F]{4}(?![0-9A-Za-z])")
_DATE = re.compile(
    rb"[0-9]{1,2}([./\-])[0-9]{1,2}\1[0-9]{2,4}|[0-9]{4}([./\-])[0-9]{1,2}\2[0-9]{1,2}"
)
# a US ZIP+4 code, or a page or article number followed by a year ("046110 2008")
# a row of 4-digit codes ("0633 0645 0645": Unicode tables) is no one's phone either
_ZIP4_OR_YEAR = re.compile(
    rb"[0-9]{5}-[0-9]{4}|[0-9]{3,6} (?:19|20)[0-9]{2}|[0-9]{4}(?: [0-9]{4}){2,}"
)
# dots: French pairs, NANP 3.3.4, and any trunk-0 number in dotted groups (0121.234.5719)
_DOTTED = re.compile(
    rb"0[1-9](?:\.[0-9]{2}){4}|[2-9][0-9]{2}\.[2-9][0-9]{2}\.[0-9]{4}"
    rb"|0[1-9][0-9]{1,4}(?:\.(?!00)[0-9]{2,8}){1,3}"  # not 0201.0020.0002 (table weights)
)
_CONTEXT = re.compile(
    rb"(?<![a-z])(?:tel|phone|call|mobile?|cell|fax|handy|telefon|t\xc3\xa9l\xc3\xa9phone|portable"
    rb"|m\xc3\xb3vil|tel\xc3\xa9fono|whatsapp|contact)[a-z]{0,6}(?:_(?:no|num|number|nr))?"
    rb"[\"']?\.?\s{0,3}[:=#]?\s{0,3}[\"']?\s{0,2}\Z"  # phone: 0612345678
    rb"|(?:call|text|ring|reach|contact|dial|sms|whatsapp|phone|message)[a-z]{0,3}"
    rb"(?: (?:me|us|him|her|them|the [a-z]{2,12}|our [a-z]{2,12})){0,2} (?:at|on|to) \Z"
    rb"|(?:my|our|his|her|their|your) (?:phone |mobile |cell )?number(?: is)?:? \Z"
)


def set_regions(codes: Iterable[str] | None) -> None:
    """Regions whose national formats are recognised; None: the environment or default."""
    global _regions
    if codes is None:
        env = os.environ.get("FTMANIFEST_PHONE_REGIONS", "")
        codes = [c for c in env.split(",") if c.strip()] or DEFAULT_REGIONS
    out = tuple(c.strip().upper() for c in codes)
    if out == tuple(DEFAULT_REGIONS):  # known good: no import of libphonenumber to check
        _regions = out
        return
    import phonenumbers

    unknown = [c for c in out if c not in phonenumbers.SUPPORTED_REGIONS]
    if unknown:
        raise ValueError(f"unknown phone region(s): {', '.join(unknown)}")
    _regions = out


def regions() -> tuple[str, ...]:
    if _regions is None:
        set_regions(None)
    assert _regions is not None
    return _regions


def warm() -> None:
    """Import libphonenumber and compile its patterns for the regions now, not per worker.

    The scan forks its workers after it built its matcher (``matcher.matcher`` calls
    this); each worker would otherwise pay ~25 ms for the import and the first parse
    in each region, on every scan.  Not at import: a verify whose files are all in
    the scan cache never parses a number (half a second of every guarded start).
    """
    for region in regions():
        _valid("030 1234567", region)
    _valid("+49 30 1234567", None)


def _valid(text: str, region: str | None) -> bool:
    import phonenumbers

    try:
        return bool(phonenumbers.is_valid_number(phonenumbers.parse(text, region)))
    except phonenumbers.NumberParseException:
        return False


def international(m: Match, g: int) -> bool:
    """``+`` and a country code, 7-15 digits (unformatted: 10+), valid for its country."""
    buf, start, end = m.string, m.start(g), m.end(g)
    if start > 0 and buf[start - 1] in _ALNUM | frozenset(b"+=_"):
        return False
    if end < len(buf) and buf[end] in _ALNUM | frozenset(b"_"):
        return False
    raw = m.group(g)
    digits = sum(1 for c in raw if 48 <= c <= 57)
    formatted = any(c in b" .-()" for c in raw[1:])
    if not (7 <= digits <= 15 and (formatted or digits >= 10)):
        return False
    return _valid(raw.decode(), None)


def national(m: Match, g: int) -> bool:
    buf, start, end = m.string, m.start(g), m.end(g)
    raw = m.group(g)
    if start > 0 and buf[start - 1] in _LEFT_BAD:
        return False
    if _GROUP_BEFORE.search(buf, max(0, start - 6), start) or _GROUP_AFTER.match(buf, end):
        return False  # part of a longer number, or the national part of a +CC number
    groups = [x for x in re.split(rb"[ ./\-()]+", raw) if x]
    digits = sum(len(x) for x in groups)
    seps = set(raw) & set(b" ./-")
    if not 9 <= digits <= 13 or _DATE.fullmatch(raw) or raw.count(b"/") > 1:
        return False
    if ord(".") in seps and not _DOTTED.fullmatch(raw) or _ZIP4_OR_YEAR.fullmatch(raw):
        return False
    steps = {int(b) - int(a) for a, b in zip(groups, groups[1:], strict=False)}
    if len(groups) > 2 and len(steps) == 1 and len({len(x) for x in groups}) == 1:
        return False  # 01 02 03 04 05: a counting sequence
    # Shapes that lists of numbers take too need a phone word before them: no separator,
    # spaces only without a trunk 0 (555 123 4567, 612 345 678), or three-digit groups.
    bare = not seps and b"(" not in raw
    spaced = seps == {32} and not raw.startswith((b"0", b"("))
    if bare or spaced or all(len(x) == 3 for x in groups):
        lo = max(0, start - 32)
        if not _CONTEXT.search(buf[lo:start].lower()):
            return False
    text = raw.decode()
    return any(_valid(text, r) for r in regions())


# Phone words of the claimed languages (English, German, French, Spanish, Italian, Dutch,
# Portuguese, Russian, Chinese, Japanese), each with the labels that may follow it.
_WORDS = (
    "t(?:e|é)l", "tel(?:e|é)fono?", "telephone", "telefone", "telefoon",
    "t(?:e|é)l(?:e|é)phone", "phone",
    "mobile?", "mobiel", "m(?:o|ó)vil", "cel(?:lulare|ular|lphone|l)", "handy", "portable", "fax",
    "telem(?:o|ó)vel", "whatsapp", "rufnummer", "(?:call|reach) (?:me|us) (?:at|on)",
    "(?:Т|т)елефон", "(?:Т|т)ел", "電話", "电话", "手机", "携帯",
)  # fmt: skip
_WORD_KEYS = ("tel", "tél", "phone", "mobil", "móvil", "cell", "handy", "portable", "fax",
              "whatsapp", "rufnummer", "celular", "call", "reach", "елефон",
              "тел", "Тел", "電話", "电话", "手机", "携帯")  # fmt: skip
_WORD_LABEL = (
    r"(?:[ _\-]?(?:numbers?|nummer|numero|número|numéro|no|nr|番号|号码))?"
    r"(?:\.|(?![A-Za-z]))\s{0,3}(?:[:=#]|：)?\s{0,3}[\"']?"
)


def after_word(m: Match, g: int) -> bool:
    """Any grouping after a phone word: libphonenumber decides for the regions."""
    buf, end = m.string, m.end(g)
    if m.start() > 0 and chr(buf[m.start() - 1]).isalpha():
        return False  # "hotel", "intel": not the word
    if end < len(buf) and (
        buf[end] in _ALNUM
        or buf[end : end + 1] in (b".", b",")
        and buf[end + 1 : end + 2].isdigit()
    ):
        return False  # fmt: skip
    raw = m.group(g)
    digits = sum(1 for c in raw if 48 <= c <= 57)
    if not 4 <= digits <= 15 or _DATE.fullmatch(raw) or _ZIP4_OR_YEAR.fullmatch(raw):
        return False
    text = raw.decode()
    return any(_valid(text, r) for r in regions())


PHONE_RULES: tuple[Rule, ...] = (
    Rule(
        "pii.phone",
        "pii",
        "phone number in international format",
        r"\+[1-9][0-9]{0,2}(?:[ .\-]?\(0\))?(?:[ .\-]?\(?[0-9]{1,4}\)?)(?:[ .\-]?[0-9]{1,10}){1,6}",
        anchors=((r"\+[1-9]", 2),),
        anchor_left="0-9A-Za-z+=_",
        validator=international,
        severity="warning",
        fwd=40,
        true_positives=("call +49 30 1234 5678", "tel: +1 (415) 555-0132", "+447911123456"),
        false_positives=(
            "x+1",
            "offset +0100",
            "a+12345678",
            "+1.5",
            "2024-01-01T10:00:00+01:00",
            "+1 000 000 0000",
        ),  # fmt: skip
    ),
    Rule(
        "pii.phone-national",
        "pii",
        "phone number after a phone word",
        "(?:"
        + "|".join(_WORDS)
        + ")"
        + _WORD_LABEL
        + r"(\(?[0-9]\)?(?:[ .\-/]?\(?[0-9]\)?){3,18})(?![0-9])",
        _WORD_KEYS,
        validator=after_word,
        group=1,
        ignore_case=True,
        gate="(?:" + "|".join(_WORDS) + r")[^0-9]{0,24}[0-9]",
        gate_len=50,
        severity="warning",
        fwd=60,
        true_positives=("Tel. 030 123456", "電話：03-1234-5678", "Телефон: 8 029 491-19-11"),
        false_positives=("hotel 0301234567", "Tel. 2026-11-30", "phone 12"),
    ),
    Rule(
        "pii.phone-national",
        "pii",
        "phone number in a national format",
        r"\(0[1-9][0-9]{0,4}\) ?[0-9]{2,8}(?:[ \-][0-9]{2,8}){0,3}"
        r"|\([2-9][0-9]{2}\) ?[2-9][0-9]{2}[ .\-][0-9]{4}"
        r"|\([1-9][0-9]\) ?9?[0-9]{4}[ .\-]?[0-9]{4}"  # Brazil: (11) 96123-4567
        r"|0[1-9][0-9]{0,4}(?:[ \-/.][0-9]{2,8}){1,4}"
        r"|0[1-9][0-9]{7,11}"
        r"|[1-9][0-9]{9,10}"  # no trunk 0 and no separator: needs a phone word
        r"|[2-9][0-9]{2}([ .\-])[2-9][0-9]{2}\1[0-9]{4}"
        r"|[6-9][0-9]{2}(?: [0-9]{2,3}){2,3}",
        anchors=(
            (r"\([0-9]", 2),
            # One anchor for every trunk-0 shape (a national number has 9+ digits): one
            # fixed-length anchor per area-code length costs more in either engine than the
            # few hex digests that start like this.
            (r"0[1-9][0-9 \-/.]{4}", 6),
            (r"[2-9][0-9]{2}[ .\-][2-9][0-9]{2}[ .\-][0-9]{4}", 12),
            (r"[6-9][0-9]{2} [0-9]{2}", 6),
            (r"[1-9][0-9]{9}", 10),
        ),
        anchor_left=r"0-9A-Za-z_+=.,:/#$\\\-",
        validator=national,
        severity="warning",
        fwd=24,
        true_positives=(
            "call (505) 658-5596",
            "020 7946 0958",
            "Tel. 030 1234567",
            "06 12 34 56 78",
        ),  # fmt: skip
        false_positives=(
            "2026-11-30",
            "30.11.2026",
            "version 1.2.3",
            "ref 0301234567",
            "ISBN 0-306-40615-2",
            "5105 1051 0510 5100",
        ),  # fmt: skip
    ),
)
