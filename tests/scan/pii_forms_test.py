"""Personal data in the forms people write: grouped cards, national
phones, lower-case IBANs, passport and national-ID numbers behind a keyword."""

from __future__ import annotations

import pytest

from ftmanifest.scan.text import phones
from ftmanifest.scan.text.ids import bsn_valid, dni_valid, nino_valid
from ftmanifest.scan.text.pii import is_test_card
from ftmanifest.scan.text.text import scan_buffer
from tests.scan.engines import ENGINES


def found(text: str, engine: str = "re") -> list[tuple[str, str, str]]:
    return [
        (f.rule, f.severity, text.encode()[slice(*f.extra["span"])].decode())
        for f in scan_buffer(text.encode(), path="x", engine=engine)
    ]


def rules(text: str, engine: str = "re") -> set[str]:
    return {r for r, _, _ in found(text, engine)}


# -- payment cards -----------------------------------------------------------

REAL_CARDS = [  # Luhn- and issuer-valid, not on any PSP's list of test numbers
    "4929 4205 7359 3480",
    "5425-2334-3010-9903",
    "3471 842097 51001",
    "3612 734586 9019",
    "4539 1488 0343 6467 883",
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("card", REAL_CARDS)
def test_grouped_card_needs_no_keyword(engine: str, card: str) -> None:
    for text in (f"Paid with {card}.", f"{card}", f'"{card}",', f"({card})"):
        assert ("pii.card-number", "error", card) in found(text, engine), text


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "card",
    ["4111111111111111", "4000000000000002", "5105105105105100", "378282246310005",
     "4242 4242 4242 4242", "5555 5555 5555 4444", "6011 1111 1111 1117",
     "3782 822463 10005", "4012888888881881", "4000 0566 5566 5556"],
)  # fmt: skip
def test_published_test_numbers_are_a_warning(engine: str, card: str) -> None:
    got = found(f"card number {card} exp 12/30", engine)
    assert [(r, s) for r, s, _ in got] == [("pii.card-test-number", "warning")]
    assert is_test_card(card.replace(" ", ""))


def test_the_issue_example() -> None:
    """Regression: "Paid with 5105 1051 0510 5100." was missed; it is a PSP test number."""
    assert found("Paid with 5105 1051 0510 5100.") == [
        ("pii.card-test-number", "warning", "5105 1051 0510 5100")
    ]


def test_bare_digit_run_needs_context() -> None:
    assert rules("id 4929420573593480 ok") == set()
    assert rules("visa 4929420573593480 ok") == {"pii.card-number"}
    assert rules("card_number: 4929420573593480") == {"pii.card-number"}


@pytest.mark.parametrize(
    "text",
    ["4929 4205 7359 3482", "4929 4205 7359 3480 2", "4929 4205-7359 3480",
     "v4929 4205 7359 3480", "4929 4205 7359 3480.5", "1234 5678 9012 3452",
     "5400 5401 5402 5403 5404 5405 5406", "542A 542B 5430 5431 5432 5433 5434 5435",
     "5226 5259 5293 5326 5360 5394 5428 5462"],
)  # fmt: skip
def test_card_lookalikes_stay_quiet(text: str) -> None:
    assert not rules(text) & {"pii.card-number", "pii.card-test-number"}


# -- phone numbers in national formats --------------------------------------

NATIONAL = ["(505) 658-5596", "505-658-5596", "020 7946 0958", "030 1234567", "06 12 34 56 78",
            "030/1234567", "(030) 1234567", "0171 2345678", "06.12.34.56.78"]  # fmt: skip


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("number", NATIONAL)
def test_national_phone(engine: str, number: str) -> None:
    assert ("pii.phone-national", "warning", number) in found(f"call {number} today", engine)
    assert ("pii.phone-national", "warning", number) in found(f"{number}.", engine)


def test_international_phone_is_one_finding() -> None:
    assert [(r, v) for r, _, v in found("call +44 20 7946 0958 now")] == [
        ("pii.phone", "+44 20 7946 0958")
    ]
    assert [r for r, _, _ in found("tel +1 (505) 658-5596")] == ["pii.phone"]


def test_list_like_national_phone_needs_context() -> None:
    for number in ("0301234567", "505 658 5596", "612 345 678"):
        assert rules(f"ref {number} x") == set()
        assert rules(f"Tel: {number}") == {"pii.phone-national"}
        assert rules(f'"phone": "{number}"') == {"pii.phone-national"}


def test_regions_are_configurable(monkeypatch) -> None:
    assert phones.DEFAULT_REGIONS == ("US", "GB", "DE", "FR", "ES", "IT", "NL", "AU", "IN", "BR")
    try:
        phones.set_regions(["US"])
        assert phones.regions() == ("US",)
        assert rules("call 020 7946 0958 now") == set()
        assert rules("call (505) 658-5596 now") == {"pii.phone-national"}
    finally:
        phones.set_regions(None)
    monkeypatch.setenv("FTMANIFEST_PHONE_REGIONS", "gb, de")
    phones.set_regions(None)
    assert phones.regions() == ("GB", "DE")
    monkeypatch.delenv("FTMANIFEST_PHONE_REGIONS")
    phones.set_regions(None)
    with pytest.raises(ValueError, match="XX"):
        phones.set_regions(["XX"])


PHONE_HARD_NEGATIVES = [
    "version 1.2.3", "torch==2.3.1", "released 2026-11-30", "am 30.11.2026", "on 01.05.2026",
    "11/30/2026", "01/05/2026", "at 10:30:15", "from 09:30 to 17:00", "ISBN 978-3-16-148410-0",
    "ISBN 0-306-40615-2", "ISBN 0306406152", "order #0123-4567-89", "order 2026-000123",
    "price $1,299.00", "€ 0,99", "52.520008, 13.404954", "lat 0.123456 lon 51.5",
    "sha 0f3a9c12d4e5b6a7", "build 0102 0304", "[0, 1, 2, 3]", "2026-01-30T12:05:33Z",
    "ids 0123 4567 8901 2345", "DE89 3704 0044 0532 0130 00", "5105 1051 0510 5100",
    "536-22-1947", "room 101 202 3030", "1700000000", "page 012 of 300", "0x0123 4567",
    "pip install peft==0.12.0", "lr 0.0002 wd 0.01", "score 0.95 0.87 0.91",
    "Boston, MA  02110-1301  USA", "Phys. Rev. E 78, 046110 2008", "0009 ; [*0201.0020.0002]",
    "<final> 0633 0645 0645", "failed tests: 571 612 1056", "<Buffer 01 02 03 04 05>",
    "A W E 041 117 132", "642 148 642 DL",
]  # fmt: skip


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("text", PHONE_HARD_NEGATIVES)
def test_phone_hard_negatives(engine: str, text: str) -> None:
    assert not rules(text, engine) & {"pii.phone", "pii.phone-national"}


# -- IBANs -------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "iban", ["de89 3704 0044 0532 0130 00", "gb82 west 1234 5698 7654 32", "DE89370400440532013000"]
)
def test_lower_case_iban(engine: str, iban: str) -> None:
    """Lower case in groups of four; compact, a lower-case IBAN looks like a hex digest."""
    assert ("pii.iban", "warning", iban) in found(f"pay to {iban}.", engine)


@pytest.mark.parametrize(
    "text",
    ["De89 3704 0044 0532 0130 00", "de89370400440532013000ab",
     "sha de89370400440532013000f3a9c12d4e5b6a7", "x-de89370400440532013000"],
)  # fmt: skip
def test_iban_lookalikes_stay_quiet(text: str) -> None:
    assert "pii.iban" not in rules(text)


# -- passport and national-ID numbers behind a keyword ----------------------

IDS = [
    ("passport no. 502135326", "pii.passport-number", "502135326"),
    ("Passport number: C01X00T47", "pii.passport-number", "C01X00T47"),
    ('{"passport_number": "C01X00T47"}', "pii.passport-number", "C01X00T47"),
    ("Reisepass C01X00T47", "pii.passport-number", "C01X00T47"),
    ("passeport n° 12AB34567", "pii.passport-number", "12AB34567"),
    ("pasaporte: PAA123456", "pii.passport-number", "PAA123456"),
    ("Personalausweis L01X00T47", "pii.de-id-card", "L01X00T47"),
    ("DNI 12345678Z", "pii.es-dni", "12345678Z"),
    ("NIE: X1234567L", "pii.es-dni", "X1234567L"),
    ("BSN 111222333", "pii.nl-bsn", "111222333"),
    ("NINO: AB 12 34 56 C", "pii.uk-nino", "AB 12 34 56 C"),
    ("national insurance number JG103759A", "pii.uk-nino", "JG103759A"),
    ("NIN AB123456D", "pii.uk-nino", "AB123456D"),
    ("national id: 8001015009087", "pii.national-id", "8001015009087"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("text", "rule", "value"), IDS)
def test_ids_with_keyword(engine: str, text: str, rule: str, value: str) -> None:
    assert (rule, "warning", value) in found(text, engine)


@pytest.mark.parametrize(
    "text",
    ["12345678Z", "DNI 12345678A", "NIE X1234567A", "BSN 111222334", "111222333", "AB123456C",
     "NINO: BG123456C", "passport is required", "passport no. 123456789", "C01X00T47",
     "passport photo 2024", "the training running 12345678Z", "passport: XXXXXXXXX",
     "NI number QQ123456C", "national id: 000000000"],
)  # fmt: skip
def test_ids_without_keyword_or_checksum_stay_quiet(text: str) -> None:
    assert not {
        r
        for r in rules(text)
        if r.startswith("pii.")
        and r.split(".")[1]
        in {"passport-number", "de-id-card", "es-dni", "nl-bsn", "uk-nino", "national-id"}
    }


def test_checksums() -> None:
    assert dni_valid("12345678Z") and not dni_valid("12345678A")
    assert dni_valid("X1234567L") and dni_valid("Y1234567X") and not dni_valid("X1234567A")
    assert bsn_valid("111222333") and bsn_valid("123456782") and not bsn_valid("123456789")
    assert nino_valid("AB123456C") and not nino_valid("BG123456C") and not nino_valid("DA123456C")
