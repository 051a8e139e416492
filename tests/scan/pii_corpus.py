"""Personal data as people write it, generated from the standards, not from the scan rules.

Test support.  Each generator draws values valid under the standard that
defines them and prints them in the ways people print them, inside short
sentences in the languages the scanner claims:

- IBAN: every country of the SWIFT IBAN registry with its BBAN shape (the
  registry's ``n`` digits, ``a`` upper-case letters, ``c`` alphanumerics),
  ISO 7064 mod-97 check digits; compact, in groups of four, lower case.
- email: RFC 5322 dot-atoms and RFC 6531 internationalised addresses (Unicode
  local parts, IDN domains in Latin with accents, Cyrillic, Greek, CJK, Devanagari).
- payment cards: ISO/IEC 7812 issuer ranges of the major brands with their lengths,
  Luhn check digit; compact after a card word, in groups of four with spaces or
  dashes, Amex 4-6-5 and Diners 4-6-4.
- national ids: the documents the scanner claims, each with its checksum, in
  natural sentences of the document's language (a verb or a few words between
  the keyword and the number).
- phones: libphonenumber's example numbers for every region it knows, several
  number types, in international and national format, after phone words.

``negatives()`` is what ML logs are full of: digests, UUIDs, git SHAs,
timestamps, float metrics, step counters, versions, token-id lists.
Everything is drawn from a fixed seed: the corpus is the same on every run.
"""

from __future__ import annotations

import hashlib
import random
import string
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

SEED = 48


@dataclass(frozen=True)
class Sample:
    text: str
    value: str  # what a finding must cover (at least in part)
    rules: tuple[str, ...]  # rule ids any of which counts
    region: str = ""  # phones in a national format: the region to scan with


# -- IBAN: SWIFT IBAN registry, BBAN structure per country -------------------

# country: BBAN shape as the registry writes it ("8n10n" = 8 digits then 10 digits)
IBAN_REGISTRY = {
    "AD": "4n4n12c", "AE": "3n16n", "AL": "8n16c", "AT": "5n11n", "AZ": "4a20c",
    "BA": "3n3n8n2n", "BE": "3n7n2n", "BG": "4a4n2n8c", "BH": "4a14c", "BI": "5n5n11n2n",
    "BR": "8n5n10n1a1c", "BY": "4c4n16c", "CH": "5n12c", "CR": "4n14n", "CY": "3n5n16c",
    "CZ": "4n6n10n", "DE": "8n10n", "DJ": "5n5n11n2n", "DK": "4n9n1n", "DO": "4c20n",
    "EE": "2n2n11n1n", "EG": "4n4n17n", "ES": "4n4n1n1n10n", "FI": "3n11n", "FK": "2a12n",
    "FO": "4n9n1n", "FR": "5n5n11c2n", "GB": "4a6n8n", "GE": "2a16n", "GI": "4a15c",
    "GL": "4n9n1n", "GR": "3n4n16c", "GT": "4c20c", "HN": "4a20n", "HR": "7n10n",
    "HU": "3n4n1n15n1n", "IE": "4a6n8n", "IL": "3n3n13n", "IQ": "4a3n12n", "IS": "4n2n6n10n",
    "IT": "1a5n5n12c", "JO": "4a4n18c", "KW": "4a22c", "KZ": "3n13c", "LB": "4n20c",
    "LC": "4a24c", "LI": "5n12c", "LT": "5n11n", "LU": "3n13c", "LV": "4a13c",
    "LY": "3n3n15n", "MC": "5n5n11c2n", "MD": "2c18c", "ME": "3n13n2n", "MK": "3n10c2n",
    "MN": "4n12n", "MR": "5n5n11n2n", "MT": "4a5n18c", "MU": "4a2n2n12n3n3a", "NI": "4a20n",
    "NL": "4a10n", "NO": "4n6n1n", "OM": "3n16c", "PK": "4a16c", "PL": "8n16n",
    "PS": "4a21c", "PT": "4n4n11n2n", "QA": "4a21c", "RO": "4a16c", "RS": "3n13n2n",
    "RU": "9n5n15c", "SA": "2n18c", "SC": "4a2n2n16n3a", "SD": "2n12n", "SE": "3n16n1n",
    "SI": "5n8n2n", "SK": "4n6n10n", "SM": "1a5n5n12c", "SO": "4n3n12n", "ST": "8n11n2n",
    "SV": "4a20n", "TL": "3n14n2n", "TN": "2n3n13n2n", "TR": "5n1n16c", "UA": "6n19c",
    "VA": "3n15n", "VG": "4a16n", "XK": "4n10n2n", "YE": "4a4n18c",
}  # fmt: skip

_KIND = {
    "n": string.digits,
    "a": string.ascii_uppercase,
    "c": string.digits + string.ascii_uppercase,
}


def _bban(rng: random.Random, shape: str) -> str:
    out, num = [], ""
    for ch in shape:
        if ch.isdigit():
            num += ch
        else:
            out.append("".join(rng.choice(_KIND[ch]) for _ in range(int(num))))
            num = ""
    return "".join(out)


def iban_of(country: str, bban: str) -> str:
    """ISO 13616 check digits: 98 - (BBAN + country + "00") mod 97."""
    moved = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in moved)) % 97
    return f"{country}{check:02d}{bban}"


_IBAN_TEMPLATES = (
    "Please transfer the deposit to IBAN {v} before Friday.",
    "Bankverbindung: {v}",
    "Mon IBAN est {v}, merci.",
    "Mi cuenta es {v}",
    "pay to {v}.",
    '{{"name": "A. Kowalski", "iban": "{v}"}}',
    "Refund account {v} (checking)",
    "{v}",
)


def ibans(per_country: int = 2) -> list[Sample]:
    rng = random.Random(SEED)
    out = []
    for country, shape in IBAN_REGISTRY.items():
        for _ in range(per_country):
            value = iban_of(country, _bban(rng, shape))
            grouped = " ".join(value[i : i + 4] for i in range(0, len(value), 4))
            for form in (value, grouped, grouped.lower(), value.lower()):
                out.append(Sample(rng.choice(_IBAN_TEMPLATES).format(v=form), form, ("pii.iban",)))
    return out


# -- email: RFC 5322 and RFC 6531 ---------------------------------------------

_ASCII_LOCAL = ("jane.doe", "j.smith", "m_rossi", "anna-lena", "kim+ml", "o.nguyen42",
                "wei.zhang", "dev.ops-team", "p.garcia", "lea_m", "x7",
                "first.last+tag")  # fmt: skip
_UNICODE_LOCAL = ("josé", "müller", "françois.dupont", "øystein", "łukasz", "zoë",
                  "иван.петров", "почта", "θωμάς", "用户", "张伟", "たなか", "दीपक",
                  "ürün.yönetimi",
                  "søren-kierkegaard", "ιωάννης", "김민준")  # fmt: skip
_ASCII_DOMAINS = ("acme-corp.io", "uni-lisboa.pt", "mail.tu-berlin.de", "hospital.org.uk",
                  "gmail.com", "proton.me", "startup.ai", "stadt-koeln.de",
                  "company.co.jp")  # fmt: skip
_IDN_DOMAINS = ("bücher.de", "müller-bau.ch", "correo.españa.es", "пример.рф", "почта.москва",
                "例子.中国", "公司.网络", "例え.テスト.jp", "παράδειγμα.ελ", "उदाहरण.भारत",
                "société.fr", "xn--bcher-kva.de", "도메인.한국")  # fmt: skip
_EMAIL_TEMPLATES = (
    "write to {v} for access",
    "Contact: {v}",
    "E-Mail: {v}",
    "Écrivez-moi à {v}, merci",
    "Mi correo es {v}",
    "Напишите на {v} сегодня",
    "请发邮件到 {v} 谢谢",
    '{{"email": "{v}"}}',
    "<{v}>",
    "cc {v}; bcc none",
)


def emails(n: int = 240) -> list[Sample]:
    rng = random.Random(SEED + 1)
    out = []
    for i in range(n):
        local = rng.choice(_UNICODE_LOCAL if i % 2 else _ASCII_LOCAL)
        domain = rng.choice(_IDN_DOMAINS if i % 3 else _ASCII_DOMAINS)
        value = f"{local}@{domain}"
        out.append(Sample(rng.choice(_EMAIL_TEMPLATES).format(v=value), value, ("pii.email",)))
    return out


# -- payment cards: ISO/IEC 7812 issuer ranges, Luhn -------------------------

# brand: (IIN ranges as (low, high) prefixes of one length, allowed lengths)
CARD_BRANDS: dict[str, tuple[tuple[tuple[int, int], ...], tuple[int, ...]]] = {
    "visa": (((4, 4),), (13, 16, 19)),
    "mastercard": (((51, 55), (2221, 2720)), (16,)),
    "amex": (((34, 34), (37, 37)), (15,)),
    "discover": (((6011, 6011), (644, 649), (65, 65)), (16, 17, 18, 19)),
    "jcb": (((3528, 3589),), (16, 17, 18, 19)),
    "diners": (((300, 305), (36, 36), (38, 39)), (14, 15, 16, 17, 18, 19)),
    "unionpay": (((62, 62),), (16, 17, 18, 19)),
    "maestro": (((50, 50), (56, 69)), (12, 13, 14, 15, 16, 17, 18, 19)),
    "mir": (((2200, 2204),), (16, 17, 18, 19)),
}


def luhn_complete(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def _card_number(rng: random.Random, brand: str, length: int) -> str:
    ranges, _ = CARD_BRANDS[brand]
    lo, hi = rng.choice(ranges)
    prefix = str(rng.randint(lo, hi))
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    return luhn_complete(body)


def _card_prints(number: str) -> list[str]:
    n = len(number)
    fours = [number[i : i + 4] for i in range(0, n, 4)]
    out = [" ".join(fours), "-".join(fours)]
    if n == 15:
        out.append(f"{number[:4]} {number[4:10]} {number[10:]}")
    if n == 14:
        out.append(f"{number[:4]} {number[4:10]} {number[10:]}")
    return out


_CARD_WORD_TEMPLATES = (
    "card number {v}, expires 09/29",
    "Kreditkarte: {v}",
    "Numéro de carte {v}",
    "tarjeta {v} caduca 11/28",
    "paid by visa {v}",
    '{{"card": "{v}", "cvv": "***"}}',
    "credit card {v}",
)
_CARD_PLAIN_TEMPLATES = ("Paid with {v}.", "charge {v} for the renewal", "{v}", "use ({v}) please")


def cards(per_length: int = 2) -> list[Sample]:
    rng = random.Random(SEED + 2)
    out = []
    rules = ("pii.card-number", "pii.card-test-number")
    for brand, (_, lengths) in CARD_BRANDS.items():
        for length in lengths:
            for _ in range(per_length):
                number = _card_number(rng, brand, length)
                word = rng.choice(_CARD_WORD_TEMPLATES)
                out.append(Sample(word.format(v=number), number, rules))
                for printed in _card_prints(number):
                    tpl = rng.choice(_CARD_WORD_TEMPLATES + _CARD_PLAIN_TEMPLATES)
                    out.append(Sample(tpl.format(v=printed), printed, rules))
    return out


# -- national ids the scanner claims, with their checksums -------------------

_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"
_NINO_FIRST = "ABCEGHJKLMNOPRSTWXYZ"
_NINO_SECOND = "ABCEGHJKLMNPRSTWXYZ"


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _dni(rng: random.Random) -> str:
    if rng.random() < 0.3:  # NIE: X/Y/Z stand for 0/1/2 in the check
        lead, body = rng.choice("XYZ"), _digits(rng, 7)
        return lead + body + _DNI_LETTERS[int(str("XYZ".index(lead)) + body) % 23]
    body = _digits(rng, 8)
    return body + _DNI_LETTERS[int(body) % 23]


def _bsn(rng: random.Random) -> str:
    while True:
        v = str(rng.randint(1, 9)) + _digits(rng, 8)
        if sum(int(d) * w for d, w in zip(v, (9, 8, 7, 6, 5, 4, 3, 2, -1), strict=True)) % 11 == 0:
            return v


def _nino(rng: random.Random) -> str:
    while True:
        prefix = rng.choice(_NINO_FIRST) + rng.choice(_NINO_SECOND)
        if prefix not in ("BG", "GB", "KN", "NK", "NT", "TN", "ZZ"):
            return prefix + _digits(rng, 6) + rng.choice("ABCD")


def _ssn(rng: random.Random) -> str:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def _de_id(rng: random.Random) -> str:
    """ICAO 9303 check digit (weights 7-3-1) after the 9-character serial."""
    alphabet = "CFGHJKLMNPRTVWXYZ0123456789"
    serial = rng.choice("CFGHJKLMNPRTVWXYZ") + "".join(rng.choice(alphabet) for _ in range(8))
    check = sum(int(c, 36) * (7, 3, 1)[i % 3] for i, c in enumerate(serial)) % 10
    return serial + str(check) if rng.random() < 0.5 else serial


def _passport(rng: random.Random, lang: str) -> str:
    up = string.ascii_uppercase
    if lang == "en":
        return _digits(rng, 9)
    if lang == "de":
        return rng.choice("CFGHJK") + "".join(
            rng.choice("CFGHJKLMNPRTVWXYZ0123456789") for _ in range(8)
        )
    if lang == "fr":
        return _digits(rng, 2) + rng.choice(up) + rng.choice(up) + _digits(rng, 5)
    if lang == "es":
        return "".join(rng.choice(up) for _ in range(3)) + _digits(rng, 6)
    if lang == "it":
        return rng.choice(up) + rng.choice(up) + _digits(rng, 7)
    return (
        rng.choice(up)
        + rng.choice(up)
        + "".join(rng.choice(up + string.digits) for _ in range(6))
        + _digits(rng, 1)
    )


def _sa_id(rng: random.Random) -> str:
    """A 13-digit national id (South African shape: birth date, serial, Luhn)."""
    body = f"{rng.randint(50, 99):02d}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}" + _digits(
        rng, 6
    )
    return luhn_complete(body)


# (rule, value maker, sentences); each sentence has the value as {v}
_ID_KINDS = (
    ("pii.es-dni", _dni, ("Mi DNI es {v}", "DNI: {v}", "con NIF {v} y domicilio en Madrid",
                          "Mi número de DNI es el {v}", "NIE {v}", "el DNI del titular es {v}.")),
    ("pii.nl-bsn", _bsn, ("mijn BSN is {v}", "BSN: {v}", "Burgerservicenummer {v}",
                          "het BSN-nummer van de patiënt is {v}", "BSN nummer {v}")),
    ("pii.uk-nino", _nino, ("my NI number is {v}", "National Insurance number: {v}",
                            "NINO {v}", "Your national insurance no. is {v}.", "NI no {v}")),
    ("pii.us-ssn", _ssn, ("SSN: {v}", "my social security number is {v}", "SSN {d}",
                          "ssn={d}", "Social Security No. {d}", "her SSN is {v}.")),
    ("pii.de-id-card", _de_id, ("Personalausweis {v}", "Meine Ausweisnummer ist {v}",
                                "Personalausweisnummer: {v}", "Ausweis-Nr. {v}")),
    ("pii.national-id", _sa_id, ("national id: {v}", "my national ID number is {v}",
                                 "National ID {v}", "national identity number {v}")),
)  # fmt: skip
_PASSPORT_SENTENCES = {
    "en": ("My passport number is {v}", "passport no. {v}", "Passport: {v}"),
    "de": ("Meine Reisepassnummer lautet {v}", "Reisepass Nr. {v}", "Reisepass: {v}"),
    "fr": ("Mon numéro de passeport est {v}", "passeport n° {v}", "Passeport : {v}"),
    "es": ("Mi número de pasaporte es {v}", "pasaporte: {v}", "Pasaporte nº {v}"),
    "it": ("Il mio numero di passaporto è {v}", "passaporto n. {v}", "Passaporto: {v}"),
    "nl": ("Mijn paspoortnummer is {v}", "paspoort nr. {v}", "Paspoort: {v}"),
}


def national_ids(per_sentence: int = 4) -> list[Sample]:
    rng = random.Random(SEED + 3)
    out = []
    for rule, make, sentences in _ID_KINDS:
        for sentence in sentences:
            for _ in range(per_sentence):
                value = make(rng)
                compact = value.replace("-", "")
                shown = compact if "{d}" in sentence else value
                text = sentence.replace("{d}", "{v}").format(v=shown)
                out.append(Sample(text, shown, (rule,)))
    for lang, sentences in _PASSPORT_SENTENCES.items():
        for sentence in sentences:
            for _ in range(per_sentence):
                value = _passport(rng, lang)
                out.append(Sample(sentence.format(v=value), value, ("pii.passport-number",)))
    return out


# -- phones: libphonenumber's example numbers, every region ------------------

_PHONE_WORDS = ("Tel. {v}", "Phone: {v}", "call me on {v}", "Telefon: {v}", "téléphone : {v}",
                "teléfono {v}", "telefono: {v}", "telefoon {v}", "Handy {v}", "mobile {v}",
                "電話：{v}", "电话 {v}", "Телефон: {v}", "celular {v}", "WhatsApp {v}")  # fmt: skip


def phones(types: tuple[str, ...] = ("FIXED_LINE", "MOBILE", "TOLL_FREE")) -> list[Sample]:
    import phonenumbers as pn

    rng = random.Random(SEED + 4)
    out = []
    rules = ("pii.phone", "pii.phone-national")
    for region in sorted(pn.SUPPORTED_REGIONS):
        for kind in types:
            number = pn.example_number_for_type(region, getattr(pn.PhoneNumberType, kind))
            if number is None:
                continue
            intl = pn.format_number(number, pn.PhoneNumberFormat.INTERNATIONAL)
            national = pn.format_number(number, pn.PhoneNumberFormat.NATIONAL)
            out.append(Sample(rng.choice(_PHONE_WORDS).format(v=intl), intl, rules))
            out.append(Sample(rng.choice(_PHONE_WORDS).format(v=national), national, rules, region))
    return out


# -- what ML logs are full of -------------------------------------------------


def negatives(n: int = 60) -> list[str]:
    rng = random.Random(SEED + 5)
    ri = rng.randint
    out: list[str] = []
    for i in range(n):
        h = hashlib.sha256(str(i).encode()).hexdigest()
        out += [
            f"sha256:{h}",
            f"md5 {hashlib.md5(str(i).encode()).hexdigest()}",  # noqa: S324 - a log's digest
            f"commit {h[:40]} ({h[:7]}) Merge branch 'main'",
            f"trace_id={h[:32]} span_id={h[32:48]}",
            f"run {uuid.UUID(int=rng.getrandbits(128))} started",
            f"2026-{ri(1, 12):02d}-{ri(1, 28):02d}T{ri(0, 23):02d}:"
            f"{ri(0, 59):02d}:{ri(0, 59):02d}.{ri(0, 999999):06d}Z",
            f"ts={ri(1_600_000_000, 1_900_000_000)} ts_ms={ri(10**12, 2 * 10**12)}",
            f"step {ri(1, 500000)}/{ri(500000, 900000)} loss {rng.random() * 4:.5f} "
            f"lr {rng.random() * 1e-3:.3e} grad_norm {rng.random() * 10:.4f}",
            f"eval/accuracy {rng.random():.6f} eval/loss {rng.random() * 3:.8f} "
            f"samples_per_second {rng.random() * 9999:.3f}",
            f"global_step={ri(10**5, 10**9)} tokens_seen={ri(10**9, 10**13)}",
            f"torch=={ri(1, 3)}.{ri(0, 20)}.{ri(0, 9)}+cu{ri(110, 129)}"
            f" transformers {ri(4, 5)}.{ri(0, 60)}.{ri(0, 9)}",
            "input_ids: [" + ", ".join(str(ri(0, 151000)) for _ in range(24)) + "]",
            "tokens " + " ".join(str(ri(1000, 9999)) for _ in range(16)),
            "labels " + " ".join(str(ri(0, 32000)) for _ in range(12)),
            f"checkpoint-{ri(1, 99) * 1000} saved in {rng.random() * 100:.2f}s "
            f"({ri(10**8, 10**11)} bytes)",
            f"{ri(10**12, 10**19)} {ri(10**8, 10**10)} {ri(10**5, 10**7)}",
        ]
    return out


def all_kinds() -> Iterator[tuple[str, list[Sample]]]:
    yield "iban", ibans()
    yield "email", emails()
    yield "card", cards()
    yield "national-id", national_ids()
    yield "phone", phones()
